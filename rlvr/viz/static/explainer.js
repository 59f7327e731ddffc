/* rlvr report / dashboard: the explainer's core. Ports of the trainer's functions (each checked against Python on
 * random inputs by tests/test_explainer_ports.py), the small SVG plots and sliders the views draw with, and the
 * registry the views (explainer_views_*.js, inlined after this file) add themselves to. No dependencies.
 * page.js calls rlvrViz.initExplainer(payload) once, and rlvrViz.refreshExplainer(payload) on each new payload. */
(() => {
  "use strict";
  const SVG = "http://www.w3.org/2000/svg";
  function el(tag, attrs, text) {
    const node = tag.startsWith("svg:") ? document.createElementNS(SVG, tag.slice(4)) : document.createElement(tag);
    Object.entries(attrs || {}).forEach(([k, v]) => { if (v !== undefined && v !== null) node.setAttribute(k, v); });
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }
  const byId = (id) => document.getElementById(id);
  const number = (v) => typeof v === "number" && isFinite(v);  // isFinite(null) is true: a missing value is no 0
  const clear = (node) => { node.replaceChildren(); return node; };
  const fmt = (v, digits) => (typeof v === "number" && isFinite(v) ? String(Number(v.toPrecision(digits || 4))) :
                              String(v));

  // ---- ports of the trainer's functions ---------------------------------------------------------------------
  function grpoAdvantages(rewards, eps) {  // rlvr.algorithms.advantages.grpo_advantages, one group
    const n = rewards.length, mean = rewards.reduce((a, r) => a + r, 0) / Math.max(n, 1);
    const std = Math.sqrt(rewards.reduce((a, r) => a + (r - mean) * (r - mean), 0) / Math.max(n - 1, 1));
    const tied = !(n > 1 && Math.max(...rewards) > Math.min(...rewards));  // exactly 0 then, not float noise
    return {mean, std, tied, advantages: rewards.map((r) => (tied ? 0 : (r - mean) / (std + eps)))};
  }
  function ppoClip(ratio, adv, low, high) {  // rlvr.algorithms.objectives.ppo_clip, one token
    const unclipped = ratio * adv, clippedTerm = Math.min(Math.max(ratio, 1 - low), 1 + high) * adv;
    return {unclipped, clippedTerm, loss: -Math.min(unclipped, clippedTerm), binds: clippedTerm < unclipped};
  }
  const KL = {  // rlvr.algorithms.loss.KL_ESTIMATORS, one token: d = log pi_ref - log pi
    k1: (logprob, refLogprob) => logprob - refLogprob,
    k2: (logprob, refLogprob) => 0.5 * (logprob - refLogprob) ** 2,
    k3: (logprob, refLogprob) => { const d = refLogprob - logprob; return Math.exp(d) - d - 1; },
  };
  function tieProbability(p, g) {  // rlvr.algorithms.difficulty.tie_probability
    return p ** g + (1 - p) ** g;
  }
  function binomial(n, k) {
    let c = 1;
    for (let i = 1; i <= k; i++) c = (c * (n - k + i)) / i;
    return c;
  }
  function expectedAbsAdvantage(p, g, eps) {  // rlvr.algorithms.difficulty.expected_abs_advantage
    let total = 0;
    for (let k = 0; k <= g; k++) {
      const rewards = Array.from({length: g}, (_, i) => (i < k ? 1 : 0));
      const adv = grpoAdvantages(rewards, eps).advantages;
      total += binomial(g, k) * p ** k * (1 - p) ** (g - k) * adv.reduce((a, x) => a + Math.abs(x), 0) / g;
    }
    return total;
  }
  function processAdvantages(stepRewards, eps) {  // rlvr.algorithms.turns.process_advantages, one group
    // stepRewards: one list of step rewards per episode (its valid turns). Pooled mean and Bessel std over every
    // step of the group, each step normalized, then summed from that step to the end of its episode.
    const flat = stepRewards.flat(), n = flat.length;
    const mean = flat.reduce((a, r) => a + r, 0) / Math.max(n, 1);
    const std = Math.sqrt(flat.reduce((a, r) => a + (r - mean) ** 2, 0) / Math.max(n - 1, 1));
    const tied = !(n > 1 && Math.max(...flat) > Math.min(...flat));
    return stepRewards.map((row) => {
      const normalized = row.map((r) => (tied ? 0 : (r - mean) / (std + eps)));
      const toGo = [];
      for (let t = normalized.length - 1, sum = 0; t >= 0; t--) { sum += normalized[t]; toGo[t] = sum; }
      return toGo;
    });
  }

  // ---- controls and plots -------------------------------------------------------------------------------------
  function slider(o) {  // {id, label, min, max, step, value, onInput, format}: a range input with its value shown
    const input = el("input", {id: o.id, type: "range", min: o.min, max: o.max, step: o.step || "any",
                               value: o.value});
    const shown = el("output", {id: o.id + "-value", "for": o.id});
    const show = () => { shown.textContent = (o.format || fmt)(parseFloat(input.value)); };
    input.addEventListener("input", () => { show(); if (o.onInput) o.onInput(parseFloat(input.value)); });
    show();
    const label = el("label", {"class": "ex-slider"}, o.label + " ");
    label.append(input, shown);
    return {node: label, input, value: () => parseFloat(input.value)};
  }
  function scales(o) {
    const W = o.width || 420, H = o.height || 240, m = {l: 46, r: 14, t: 20, b: 34};
    const X = (v) => m.l + ((v - o.x.min) / (o.x.max - o.x.min || 1)) * (W - m.l - m.r);
    // y.log: a log10 axis from y.min (> 0; smaller values sit on it) to y.max, for values spanning decades (KL)
    const f = o.y.log ? (v) => Math.log10(Math.max(v, o.y.min)) : (v) => v;
    const Y = (v) => H - m.b - ((f(v) - f(o.y.min)) / (f(o.y.max) - f(o.y.min) || 1)) * (H - m.t - m.b);
    return {W, H, m, X, Y};
  }
  function ticks(lo, hi) {  // five ticks; whole numbers on an axis of whole numbers (steps, G) wide enough for them
    const raw = [0, 0.25, 0.5, 0.75, 1].map((f) => lo + f * (hi - lo));
    const whole = Number.isInteger(lo) && Number.isInteger(hi) && hi - lo >= 4;
    return whole ? [...new Set(raw.map(Math.round))] : raw;
  }
  function logTicks(lo, hi) {  // the powers of ten between lo and hi, and both ends
    const out = [lo];
    for (let e = Math.ceil(Math.log10(lo)); 10 ** e < hi; e++) if (10 ** e > lo) out.push(10 ** e);
    return [...out, hi];
  }
  function axes(svg, o, s) {
    (o.y.log ? logTicks(o.y.min, o.y.max) : ticks(o.y.min, o.y.max)).forEach((v) => {
      svg.appendChild(el("svg:line", {x1: s.m.l, x2: s.W - s.m.r, y1: s.Y(v), y2: s.Y(v), "class": "grid"}));
      svg.appendChild(el("svg:text", {x: s.m.l - 5, y: s.Y(v) + 4, "class": "tick", "text-anchor": "end"}, fmt(v, 3)));
    });
    (o.x.ticks === false ? [] : ticks(o.x.min, o.x.max)).forEach((v) => {
      svg.appendChild(el("svg:text", {x: s.X(v), y: s.H - s.m.b + 14, "class": "tick", "text-anchor": "middle"},
                         fmt(v, 3)));
    });
    svg.appendChild(el("svg:line", {x1: s.m.l, x2: s.W - s.m.r, y1: s.H - s.m.b, y2: s.H - s.m.b, "class": "axis"}));
    svg.appendChild(el("svg:line", {x1: s.m.l, x2: s.m.l, y1: s.m.t, y2: s.H - s.m.b, "class": "axis"}));
    svg.appendChild(el("svg:text", {x: (s.W + s.m.l) / 2, y: s.H - 4, "class": "label", "text-anchor": "middle"},
                       o.x.label || ""));
    // the y label above the axis, level: rotated beside it, it ran into the ticks of a small plot
    svg.appendChild(el("svg:text", {x: 4, y: 11, "class": "label", "text-anchor": "start"}, o.y.label || ""));
  }
  /* plot({id, x: {min, max, label}, y: {...}, bands: [{x0, x1, cls}], lines: [{key, points: [[x, y]], cls, label}],
   * dots: [{key, x, y, cls, label}]}) -> <svg class="ex-plot" data-plot=id>; every line and dot carries data-key
   * (and dots data-x, data-y) for the tests. Points outside the y range are drawn at its edge. */
  function plot(o) {
    const s = scales(o), svg = el("svg:svg", {viewBox: `0 0 ${s.W} ${s.H}`, "class": "ex-plot", "data-plot": o.id,
                                               role: "img"});
    const clampY = (v) => s.Y(Math.min(Math.max(v, o.y.min), o.y.max));
    (o.bands || []).forEach((b) => svg.appendChild(el("svg:rect", {
      x: s.X(Math.max(b.x0, o.x.min)), y: s.m.t, height: s.H - s.m.t - s.m.b, "class": "band " + (b.cls || ""),
      width: Math.max(0, s.X(Math.min(b.x1, o.x.max)) - s.X(Math.max(b.x0, o.x.min))), "data-key": b.key})));
    axes(svg, o, s);
    (o.lines || []).forEach((l) => {
      const pts = l.points.filter(([x, y]) => number(x) && number(y));
      const d = pts.map(([x, y], i) => `${i ? "L" : "M"}${s.X(x).toFixed(1)},${clampY(y).toFixed(1)}`).join("");
      const path = el("svg:path", {d, "class": "ex-line " + (l.cls || ""), "data-key": l.key, fill: "none"});
      if (l.label) path.appendChild(el("svg:title", {}, l.label));
      svg.appendChild(path);
    });
    (o.dots || []).forEach((p) => {
      if (!number(p.x) || !number(p.y)) return;
      const c = el("svg:circle", {cx: s.X(p.x).toFixed(1), cy: clampY(p.y).toFixed(1), r: p.r || 4,
                                  "class": "ex-dot " + (p.cls || ""), "data-key": p.key, "data-x": p.x, "data-y": p.y});
      if (p.label) c.appendChild(el("svg:title", {}, p.label));
      svg.appendChild(c);
    });
    return svg;
  }
  /* bars({id, values, labels, min, max, cls(i, v)}) -> <svg class="ex-bars">: one rect.bar per value, from 0 up
   * (positive) or down (negative), each with data-index and data-value. */
  function bars(o) {
    const lo = Math.min(o.min ?? 0, ...o.values, 0), hi = Math.max(o.max ?? 0, ...o.values, 0);
    const s = scales({x: {min: 0, max: o.values.length}, y: {min: lo, max: hi}, width: o.width, height: o.height});
    const svg = el("svg:svg", {viewBox: `0 0 ${s.W} ${s.H}`, "class": "ex-bars", "data-plot": o.id, role: "img"});
    axes(svg, {x: {min: 0, max: o.values.length, label: o.xlabel, ticks: false}, y: {min: lo, max: hi,
                                                                                   label: o.ylabel}}, s);
    const width = (s.W - s.m.l - s.m.r) / Math.max(o.values.length, 1);
    o.values.forEach((v, i) => {
      const y0 = s.Y(0), y1 = s.Y(v);
      const rect = el("svg:rect", {x: (s.X(i) + width * 0.15).toFixed(1), width: (width * 0.7).toFixed(1),
                                   y: Math.min(y0, y1).toFixed(1), height: Math.abs(y1 - y0).toFixed(1),
                                   "class": "bar " + (o.cls ? o.cls(i, v) : v >= 0 ? "pos" : "neg"),
                                   "data-index": i, "data-value": v});
      rect.appendChild(el("svg:title", {}, `${o.labels ? o.labels[i] : i + 1}: ${fmt(v, 5)}`));
      svg.appendChild(rect);
      svg.appendChild(el("svg:text", {x: (s.X(i) + width / 2).toFixed(1), y: s.H - s.m.b + 14, "class": "tick",
                                      "text-anchor": "middle"}, o.tick ? o.tick(i) : i + 1));
    });
    return svg;
  }
  function show(node, value) {  // a computed number: its exact value in data-value, rounded text
    node = typeof node === "string" ? byId(node) : node;
    node.setAttribute("data-value", String(value));
    node.textContent = typeof value === "number" ? fmt(value, 7) : String(value);
    return node;
  }
  /* Where a view's data comes from: the run, or the example recorded on the embedded model (said on the page). */
  function sourceNote(body, part) {
    const note = el("p", {"class": "ex-source " + (part && part.source === "example" ? "example" : "run"),
                          "data-source": part ? part.source : "none"});
    note.textContent = !part ? "Nothing to show: neither this run nor the shipped example has this data." :
      part.source === "example" ? "From the example recorded on the embedded model" +
        (part.why ? ` (this run ${part.why})` : "") + (part.made ? `: ${part.made}` : "") + "." :
      "From this run" + (part.made ? `: ${part.made}` : "") + ".";
    body.appendChild(note);
    return note;
  }

  // ---- the registry ------------------------------------------------------------------------------------------
  const views = [];
  /* addView({id, order, title, build(body, ctx), parts?, refresh?}): build draws the view into body. A dashboard's
   * new payload then calls refresh(body, ctx) when the view has one (it keeps the reader's picks); else, with
   * parts (the names of the payload.explainer parts it draws, explainer_data.py), the view is drawn again when
   * one of them changed: a view drawn from the run follows the run as it trains. */
  function addView(view) { views.push(view); }
  const drawn = new Map();  // view id -> {body, key}: the JSON of the parts it was drawn from
  const partsKey = (view, payload) => JSON.stringify((view.parts || []).map((p) => (payload.explainer || {})[p]));
  function draw(view, body, payload) {
    clear(body);
    try {
      view.build(body, {data: payload.explainer || {}, payload, live: Boolean(payload.live)});
    } catch (err) {  // one broken view must not take the page down: say so where it would have been
      body.appendChild(el("p", {"class": "error"}, `this view could not be drawn: ${err.message}`));
      console.error(err);
    }
    drawn.set(view.id, {body, key: partsKey(view, payload)});
  }
  function initExplainer(payload) {
    const box = clear(byId("ex-views"));
    views.sort((a, b) => a.order - b.order).forEach((view) => {
      const section = el("section", {"class": "ex-view card", id: "view-" + view.id});
      section.appendChild(el("h3", {}, `${view.order}. ${view.title}`));
      const body = el("div", {"class": "ex-body"});
      section.appendChild(body);
      box.appendChild(section);
      draw(view, body, payload);
    });
  }
  function refreshExplainer(payload) {
    views.forEach((view) => {
      const last = drawn.get(view.id);
      if (!last) return;
      if (view.refresh) {
        try {
          view.refresh(last.body, {data: payload.explainer || {}, payload, live: Boolean(payload.live)});
        } catch (err) {
          console.error(err);
        }
      } else if (view.parts && partsKey(view, payload) !== last.key) {
        draw(view, last.body, payload);
      }
    });
  }
  window.rlvrViz = {el, byId, clear, fmt, show, slider, plot, bars, sourceNote, addView, initExplainer,
                    refreshExplainer, grpoAdvantages, ppoClip, KL, tieProbability, expectedAbsAdvantage,
                    processAdvantages};
})();
