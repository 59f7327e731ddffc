/* rlvr report / dashboard: draws the payload of rlvr/viz/page.py into inline SVG and HTML. No dependencies.
 * Every plotted point is an SVG circle with data-run, data-series, data-step and data-value (the tests read them). */
(() => {
  "use strict";
  const SVG = "http://www.w3.org/2000/svg";
  const PALETTE = ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#ca8a04", "#db2777",
                   "#4b5563", "#65a30d"];
  const DASHES = ["", "5 3", "2 2", "8 3 2 3", "1 3"];
  const ACCURACY = /^(pass@\d+|greedy|maj@\d+|best_of_\d+)$/;
  const CHARTS = [
    {id: "reward", title: "Reward (mean)", keys: ["reward_mean"], prefix: "reward/"},
    {id: "heldout", title: "Held-out accuracy", match: (k) => k.startsWith("eval/") && ACCURACY.test(k.slice(5))},
    {id: "kl", title: "KL to the reference", keys: ["kl"]},
    {id: "length", title: "Completion length (tokens)", keys: ["completion_length", "completion_length_max"]},
    {id: "reflection", title: "Reflection rate", keys: ["reflection_rate"]},
    {id: "tied", title: "Tied share (groups with zero std)", keys: ["zero_std_fraction"]},
    {id: "clip", title: "Clip fraction", keys: ["clip_fraction", "clip_fraction_low", "clip_fraction_high"]},
    {id: "time", title: "Time per phase (s)", match: (k) => /^time\/.*_s$/.test(k)},
    {id: "throughput", title: "Tokens per second", keys: ["tokens_per_s"]},
    {id: "loss", title: "Loss", keys: ["loss", "policy_loss"]},
    {id: "entropy", title: "Entropy", keys: ["entropy"]},
    {id: "grad_norm", title: "Gradient norm", keys: ["grad_norm"]},
    {id: "truncated", title: "Truncated share", keys: ["truncated_fraction"]},
    {id: "memory", title: "Peak memory (GB)", keys: ["peak_memory_gb"]},
  ];
  // The group view remembers its step by number: a dashboard's window of latest steps slides under it.
  const state = {data: null, groupRun: null, groupStep: null, followLatest: false, mode: "advantage", etag: null};

  function el(tag, attrs, text) {
    const node = tag.startsWith("svg:") ? document.createElementNS(SVG, tag.slice(4)) : document.createElement(tag);
    Object.entries(attrs || {}).forEach(([k, v]) => node.setAttribute(k, v));
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }
  const byId = (id) => document.getElementById(id);
  const clear = (node) => { node.replaceChildren(); return node; };
  const these = (data) => (data.runs.length > 1 ? "these runs" : "this run");
  function fmt(v, digits = 4) {
    if (v === null || v === undefined || !isFinite(v)) return "n/a";
    if (v === 0) return "0";
    const a = Math.abs(v);
    if (a >= 1e5 || a < 1e-4) return v.toExponential(Math.max(digits - 1, 1)).replace(/\.?0+e/, "e");
    return String(Number(v.toPrecision(digits)));
  }

  /* ---- curves ------------------------------------------------------------------------------------- */
  function chartKeys(def, run) {
    const keys = Object.keys(run.curves.series);
    if (!def.keys) return keys.filter(def.match).sort();
    const extra = def.prefix ? keys.filter((k) => k.startsWith(def.prefix)).sort() : [];
    return def.keys.filter((k) => keys.includes(k)).concat(extra);
  }
  function seriesOf(def, run) {
    const steps = run.curves.steps;
    const out = chartKeys(def, run).map((key) => {
      const col = run.curves.series[key];
      const points = steps.map((s, i) => [s, col[i]]).filter((p) => typeof p[1] === "number" && isFinite(p[1]));
      return {key, points, source: "metrics.jsonl"};
    }).filter((s) => s.points.length);
    if (out.length || def.id !== "heldout") return out;
    const names = new Set();  // older runs: held-out numbers in eval.jsonl only
    run.evaluations.forEach((e) => Object.keys(e).filter((k) => ACCURACY.test(k)).forEach((k) => names.add(k)));
    return [...names].sort().map((name) => ({
      key: "eval/" + name, source: "eval.jsonl",
      points: run.evaluations.filter((e) => typeof e[name] === "number").map((e) => [e.step, e[name]])}));
  }
  function ticks(lo, hi, count) {
    const raw = (hi - lo) / count, mag = Math.pow(10, Math.floor(Math.log10(raw)));
    const step = [1, 2, 5, 10].map((m) => m * mag).find((s) => raw <= s);
    const out = [];
    for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) {
      out.push(Math.abs(v) < step * 1e-9 ? 0 : v);
    }
    return out;
  }
  function extent(values) {
    let lo = Math.min(...values), hi = Math.max(...values);
    if (lo === hi) { const pad = Math.abs(lo) * 0.1 || 1; lo -= pad; hi += pad; }
    return [lo, hi];
  }
  function axes(svg, box, xr, yr, X, Y) {
    const {W, H, m} = box;
    ticks(yr[0], yr[1], 5).forEach((v) => {
      svg.appendChild(el("svg:line", {x1: m.l, x2: W - m.r, y1: Y(v), y2: Y(v), "class": "grid"}));
      svg.appendChild(el("svg:text", {x: m.l - 6, y: Y(v) + 4, "class": "tick", "text-anchor": "end"}, fmt(v, 3)));
    });
    ticks(xr[0], xr[1], 6).filter((v) => Math.round(v) === v).forEach((v) => {
      svg.appendChild(el("svg:line", {x1: X(v), x2: X(v), y1: H - m.b, y2: H - m.b + 4, "class": "axis"}));
      svg.appendChild(el("svg:text", {x: X(v), y: H - m.b + 16, "class": "tick", "text-anchor": "middle"}, fmt(v)));
    });
    svg.appendChild(el("svg:line", {x1: m.l, x2: W - m.r, y1: H - m.b, y2: H - m.b, "class": "axis"}));
    svg.appendChild(el("svg:line", {x1: m.l, x2: m.l, y1: m.t, y2: H - m.b, "class": "axis"}));
    svg.appendChild(el("svg:text", {x: (W + m.l) / 2, y: H - 4, "class": "label", "text-anchor": "middle"}, "step"));
  }
  function drawSeries(svg, legend, s, style, runName, X, Y) {
    const g = el("svg:g", {"class": "series", "data-run": s.run, "data-series": s.key, "data-source": s.source});
    const d = s.points.map((p, i) => (i ? "L" : "M") + X(p[0]).toFixed(1) + " " + Y(p[1]).toFixed(1)).join(" ");
    g.appendChild(el("svg:path", {d, stroke: style.colour, "stroke-dasharray": style.dash, fill: "none",
                                  "class": "line"}));
    const r = s.points.length > 150 ? 1.2 : 2.4;
    s.points.forEach(([step, value]) => {
      const c = el("svg:circle", {cx: X(step).toFixed(1), cy: Y(value).toFixed(1), r, fill: style.colour, "class": "pt",
                                  "data-run": s.run, "data-series": s.key, "data-step": step, "data-value": value});
      c.appendChild(el("svg:title", {}, `${runName} · ${s.key} @ step ${step}: ${fmt(value, 6)}`));
      g.appendChild(c);
    });
    svg.appendChild(g);
    const item = el("span", {"class": "item"}), swatch = el("span", {"class": "swatch"});
    swatch.style.borderTop = `3px ${style.dash ? "dashed" : "solid"} ${style.colour}`;
    item.append(swatch, style.label);
    legend.appendChild(item);
  }
  function drawChart(def, runs) {
    const lines = runs.flatMap((run, ri) => seriesOf(def, run).map((s, si) => ({...s, run: ri, index: si})));
    if (!lines.length) return null;
    const box = {W: 460, H: 230, m: {l: 56, r: 14, t: 12, b: 34}}, {W, H, m} = box;
    const all = lines.flatMap((s) => s.points);
    const xr = extent(all.map((p) => p[0])), yr = extent(all.map((p) => p[1]));
    const X = (v) => m.l + (v - xr[0]) / (xr[1] - xr[0]) * (W - m.l - m.r);
    const Y = (v) => H - m.b - (v - yr[0]) / (yr[1] - yr[0]) * (H - m.t - m.b);
    const svg = el("svg:svg", {viewBox: `0 0 ${W} ${H}`, "class": "chart", "data-chart": def.id, role: "img"});
    const legend = el("div", {"class": "legend"});
    axes(svg, box, xr, yr, X, Y);
    lines.forEach((s, li) => {  // one run: a colour per series; several: a colour per run, a dash per series
      const several = runs.length > 1, name = runs[s.run].name;
      const style = {colour: PALETTE[(several ? s.run : li) % PALETTE.length],
                     dash: several ? DASHES[s.index % DASHES.length] : "",
                     label: several ? `${name} · ${s.key}` : s.key};
      drawSeries(svg, legend, s, style, name, X, Y);
    });
    const card = el("div", {"class": "card chart-card", id: "chart-" + def.id});
    card.append(el("h3", {}, def.title), svg, legend);
    return card;
  }
  function renderCurves(data) {
    const grid = clear(byId("charts")), missing = [];
    CHARTS.forEach((def) => {
      const card = drawChart(def, data.runs);
      if (card) grid.appendChild(card); else missing.push(def.title.toLowerCase());
    });
    byId("charts-missing").textContent = missing.length ? `Not recorded in ${these(data)}: ${missing.join(", ")}.` : "";
  }

  /* ---- completions and config --------------------------------------------------------------------- */
  function verdictBadges(verdicts) {
    const box = el("span", {"class": "verdicts"});
    verdicts.forEach((v) => box.appendChild(el("span", {"class": "badge outcome-" + v.outcome, title: v.detail || ""},
      `${v.verifier}: ${v.outcome}` + (v.score === null ? "" : ` (${fmt(v.score, 3)})`))));
    return box;
  }
  function renderCompletions(data) {
    const list = clear(byId("completion-list"));
    data.runs.forEach((run) => {
      if (data.runs.length > 1) list.appendChild(el("h3", {}, run.name));
      if (!run.completions.length) list.appendChild(el("p", {"class": "muted"}, "No samples.jsonl in this run."));
      let phase = null, row = null;
      run.completions.forEach((c) => {
        if (c.phase !== phase) {
          phase = c.phase;
          row = el("div", {"class": "cards"});
          list.append(el("h4", {}, `${phase} · step ${c.step}`), row);
        }
        const card = el("div", {"class": "card completion", "data-phase": c.phase, "data-step": c.step});
        const meta = el("div", {"class": "meta"}, `reference ${c.reference} · reward ${fmt(c.reward)} `);
        meta.appendChild(verdictBadges(c.verdicts));
        card.append(el("div", {"class": "question"}, c.question), meta, el("pre", {"class": "text"}, c.text));
        row.appendChild(card);
      });
    });
  }
  function renderConfig(data) {
    // a panel the reader closed stays closed when the dashboard redraws (by run index)
    const closed = Array.from(byId("config-list").querySelectorAll("details")).map((d) => !d.open);
    const list = clear(byId("config-list")), names = clear(byId("run-list"));
    data.runs.forEach((run, ri) => {
      const box = el("details", closed[ri] ? {} : {open: ""});
      box.append(el("summary", {}, `${run.name} — ${run.path}/config.yaml`), el("pre", {}, run.config || "(none)"));
      list.appendChild(box);
      const item = el("span", {"class": "run-name"}, run.name);
      if (data.runs.length > 1) item.style.borderBottom = "3px solid " + PALETTE[ri % PALETTE.length];
      names.appendChild(item);
    });
    byId("footer").textContent = (data.live ? "rlvr dashboard, read " : "rlvr report, written ") + data.generated;
  }

  /* ---- group view --------------------------------------------------------------------------------- */
  const COLOURS = {positive: [37, 99, 235], negative: [220, 38, 38], neutral: [100, 116, 139],
                   high: [234, 88, 12], low: [147, 51, 234]};
  const rgba = (name, alpha) => `rgba(${COLOURS[name].join(", ")}, ${alpha.toFixed(3)})`;
  function advantageColour(a, scale) {  // intensity by |A| relative to the group's largest
    if (!a) return "transparent";
    return rgba(a > 0 ? "positive" : "negative", 0.12 + 0.55 * Math.min(Math.abs(a) / scale, 1));
  }
  // PPO's clip binds (and takes the token's gradient away) only where it would push further out: A > 0 with the
  // ratio above 1 + eps_high, A < 0 below 1 - eps_low (rlvr.objectives.ppo_clip; what clip_fraction_high/_low
  // count). Elsewhere, even outside the range, the gradient flows: grey, darker away from 1.
  function ratioColour(r, a, group) {
    if (a > 0 && r > 1 + group.clip_high) return rgba("high", 0.6);
    if (a < 0 && r < 1 - group.clip_low) return rgba("low", 0.6);
    const bound = r >= 1 ? group.clip_high : group.clip_low;
    return rgba("neutral", 0.05 + 0.4 * Math.min(Math.abs(r - 1) / bound, 1));
  }
  const LEGENDS = {
    advantage: [[advantageColour(1, 1), "positive advantage (pushed up)"],
                [advantageColour(-1, 1), "negative advantage (pushed down)"], ["transparent", "zero advantage"]],
    ratio: [[rgba("neutral", 0.05), "ratio 1"], [rgba("neutral", 0.45), "far from 1, clip not binding"],
            [rgba("high", 0.6), "clip binds high (A > 0, ratio > 1 + eps_high)"],
            [rgba("low", 0.6), "clip binds low (A < 0, ratio < 1 - eps_low)"]],
  };
  function legendItems(items) {
    const box = clear(byId("group-legend"));
    items.forEach(([colour, text]) => {
      const item = el("span", {"class": "item"}), chip = el("span", {"class": "chip"});
      chip.style.background = colour;
      item.append(chip, text);
      box.appendChild(item);
    });
  }
  function fillSelect(select, options, value) {
    clear(select).append(...options.map(([v, text]) => el("option", {value: v}, text)));
    select.value = String(value);
  }
  function renderGroups(data) {
    const runs = data.runs.map((r, i) => [i, r]).filter(([, r]) => r.groups.length);
    const cards = clear(byId("group-cards")), head = clear(byId("group-head"));
    byId("group-run-label").style.display = runs.length > 1 ? "" : "none";
    if (!runs.length) {
      fillSelect(byId("group-step"), [], "");
      legendItems([]);
      head.appendChild(el("p", {"class": "muted"}, `No groups.jsonl in ${these(data)} (older runs do not write it).`));
      return;
    }
    if (!runs.some(([i]) => i === state.groupRun)) state.groupRun = runs[0][0];
    fillSelect(byId("group-run"), runs.map(([i, r]) => [i, r.name]), state.groupRun);
    const groups = data.runs[state.groupRun].groups;
    let index = groups.findIndex((g) => g.step === state.groupStep);
    if (index < 0 || state.followLatest) index = groups.length - 1;  // the newest step; a dashboard follows it
    state.groupStep = groups[index].step;
    const label = (g) => `step ${g.step}${g.phase ? ` (${g.phase})` : ""} · ${g.prompt_id}`;
    fillSelect(byId("group-step"), groups.map((g, i) => [i, label(g)]), index);
    const group = groups[index];
    ["advantage", "ratio"].forEach((mode) => byId("mode-" + mode).classList.toggle("active", state.mode === mode));
    head.append(el("div", {"class": "question"}, group.question), el("div", {"class": "meta"},
      `step ${group.step} · reference ${group.reference} · G = ${group.completions.length} · clip range ` +
      `[${fmt(1 - group.clip_low)}, ${fmt(1 + group.clip_high)}]`));
    const scale = Math.max(...group.completions.flatMap((c) => c.token_advantages.map(Math.abs)), 0) || 1;
    legendItems(LEGENDS[state.mode]);
    group.completions.forEach((c, j) => cards.appendChild(groupCard(group, c, j, scale)));
  }
  function groupCard(group, c, j, scale) {
    const card = el("div", {"class": "card member", "data-index": j, "data-advantage": c.advantage});
    const meta = el("div", {"class": "meta"},
      `#${j + 1} · reward ${fmt(c.reward)} · advantage ${fmt(c.advantage)}${c.truncated ? " · truncated" : ""}` +
      (c.episode ? ` · ${c.episode.messages.filter((m) => m.role === "assistant").length} turns · ` +
        `${c.episode.valid_calls} valid / ${c.episode.invalid_calls} bad calls · ${c.episode.stop_reason}` : "") + " ");
    meta.appendChild(verdictBadges(c.verdicts));
    card.appendChild(meta);
    const ratios = state.mode === "ratio" ? c.token_ratios : null;
    if (state.mode === "ratio" && !ratios) {
      card.appendChild(el("p", {"class": "ratio-missing muted"},
                          "token ratios were not recorded for this completion (token_ratios is null)"));
    }
    const body = el("div", {"class": "tokens"});
    c.tokens.forEach((t, k) => {
      if (c.sampled && !c.sampled[k]) {  // an episode's environment turn: not the model's, no advantage (issue 26)
        body.appendChild(el("span", {"class": "tok env", "title": "environment turn (not trained on)"}, t));
        return;
      }
      const span = el("span", {"class": "tok", "data-adv": c.token_advantages[k]}, t);
      if (c.token_ratios) span.setAttribute("data-ratio", c.token_ratios[k]);
      span.style.backgroundColor = state.mode === "advantage" ? advantageColour(c.token_advantages[k], scale)
        : (ratios ? ratioColour(ratios[k], c.token_advantages[k], group) : "transparent");
      span.title = `advantage ${fmt(c.token_advantages[k])}` +
                   (c.token_ratios ? ` · ratio ${fmt(c.token_ratios[k], 5)}` : "");
      body.appendChild(span);
    });
    card.appendChild(body);
    return card;
  }
  function wireGroups() {
    byId("group-run").addEventListener("change", (e) => {
      Object.assign(state, {groupRun: Number(e.target.value), groupStep: null, followLatest: true});
      renderGroups(state.data);
    });
    byId("group-step").addEventListener("change", (e) => {
      const groups = state.data.runs[state.groupRun].groups, index = Number(e.target.value);
      state.groupStep = groups[index].step;
      state.followLatest = state.data.live && index === groups.length - 1;
      renderGroups(state.data);
    });
    ["advantage", "ratio"].forEach((mode) => byId("mode-" + mode).addEventListener("click", () => {
      state.mode = mode;
      renderGroups(state.data);
    }));
  }

  /* ---- explainer: ports of rlvr.advantages.grpo_advantages, rlvr.objectives.ppo_clip, rlvr.loss.kl_k3 ---- */
  function grpoAdvantages(rewards, eps) {
    const n = rewards.length, mean = rewards.reduce((a, r) => a + r, 0) / Math.max(n, 1);
    const std = Math.sqrt(rewards.reduce((a, r) => a + (r - mean) * (r - mean), 0) / Math.max(n - 1, 1));
    const tied = !(n > 1 && Math.max(...rewards) > Math.min(...rewards));  // exactly 0 then, not float noise
    return {mean, std, tied, advantages: rewards.map((r) => (tied ? 0 : (r - mean) / (std + eps)))};
  }
  function ppoClip(ratio, adv, low, high) {
    const unclipped = ratio * adv, clippedTerm = Math.min(Math.max(ratio, 1 - low), 1 + high) * adv;
    return {unclipped, clippedTerm, loss: -Math.min(unclipped, clippedTerm), binds: clippedTerm < unclipped};
  }
  function klK3(logprob, refLogprob) {
    const d = refLogprob - logprob;
    return {d, value: Math.exp(d) - d - 1};
  }
  function exShow(node, value) {
    node = typeof node === "string" ? byId(node) : node;
    node.setAttribute("data-value", String(value));
    node.textContent = typeof value === "number" ? String(Number(value.toPrecision(7))) : String(value);
  }
  const exNumber = (id) => parseFloat(byId(id).value);
  const exRewards = () => [...document.querySelectorAll("#ex-rewards input")].map((i) => parseFloat(i.value));
  function exRewardRows(values) {
    const box = clear(byId("ex-rewards"));
    values.forEach((v, i) => {
      const input = el("input", {id: "ex-r-" + i, type: "number", step: "0.1", value: v});
      input.addEventListener("input", exCompute);
      const remove = el("button", {type: "button", id: "ex-remove-" + i, title: "remove this completion"}, "remove");
      remove.addEventListener("click", () => { const r = exRewards(); r.splice(i, 1); exRewardRows(r); });
      remove.disabled = values.length <= 1;
      const row = el("div", {"class": "ex-reward"});
      row.append(el("label", {"for": "ex-r-" + i}, "r" + (i + 1)), input, remove);
      box.appendChild(row);
    });
    byId("ex-g").textContent = String(values.length);
    exCompute();
  }
  function exCompute() {
    const rewards = exRewards(), low = exNumber("ex-eps-low"), high = exNumber("ex-eps-high");
    const rho = exNumber("ex-ratio"), beta = exNumber("ex-beta"), eps = exNumber("ex-std-eps");
    const pi = exNumber("ex-pi"), piRef = exNumber("ex-pi-ref");
    const bad = [...rewards, low, high, rho, beta, eps].some((v) => !isFinite(v)) || !(pi > 0 && pi <= 1) ||
                !(piRef > 0 && piRef <= 1) || rho < 0 || beta < 0 || eps <= 0 || low < 0 || high < 0;
    byId("ex-error").textContent = bad ? "Every field needs a number: rho, beta, eps_low, eps_high >= 0, " +
                                         "std eps > 0, 0 < pi <= 1, 0 < pi_ref <= 1." : "";
    const rows = clear(byId("ex-rows"));
    if (bad) return;
    const adv = grpoAdvantages(rewards, eps), kl = klK3(Math.log(pi), Math.log(piRef));
    [["ex-mean", adv.mean], ["ex-std", adv.std], ["ex-tied", adv.tied ? "yes" : "no"], ["ex-log-ratio", kl.d],
     ["ex-kl", kl.value], ["ex-kl-term", beta * kl.value]].forEach(([id, v]) => exShow(id, v));
    adv.advantages.forEach((a, i) => {
      const s = ppoClip(rho, a, low, high), tr = el("tr");
      tr.appendChild(el("td", {}, i + 1));
      [["reward", rewards[i]], ["adv", a], ["unclipped", s.unclipped], ["clipped-term", s.clippedTerm],
       ["loss", s.loss], ["binds", s.binds ? "yes" : "no"], ["total", s.loss + beta * kl.value]].forEach(([key, v]) => {
        const td = el("td", {id: `ex-${key}-${i}`});
        exShow(td, v);
        tr.appendChild(td);
      });
      rows.appendChild(tr);
    });
  }
  function initExplainer(defaults) {
    [["ex-eps-low", "eps_low"], ["ex-eps-high", "eps_high"], ["ex-ratio", "ratio"], ["ex-std-eps", "std_eps"],
     ["ex-beta", "beta"], ["ex-pi", "pi"], ["ex-pi-ref", "pi_ref"]].forEach(([id, key]) => {
      byId(id).value = defaults[key];
      byId(id).addEventListener("input", exCompute);
    });
    byId("ex-add").addEventListener("click", () => exRewardRows([...exRewards(), 0]));
    exRewardRows(defaults.rewards);
  }

  /* ---- data, live updates ------------------------------------------------------------------------- */
  function render(data) {
    state.data = data;
    renderCurves(data);
    renderCompletions(data);
    renderGroups(data);
    renderConfig(data);
  }
  const setStatus = (text) => { byId("status").textContent = text; };
  async function poll() {
    try {
      const headers = state.etag ? {"If-None-Match": state.etag} : {};
      const res = await fetch("api/data", {cache: "no-store", headers});
      if (res.status === 304) {
        setStatus("live: no new data since " + state.data.generated);
      } else if (!res.ok) {
        setStatus("live: " + (await res.json()).error);
      } else {
        state.etag = res.headers.get("ETag");
        render(await res.json());
        setStatus("live: updated " + state.data.generated);
      }
    } catch (err) {
      setStatus(`live: the dashboard does not answer (${err.message})`);
    }
    setTimeout(poll, 2000);
  }
  function start() {
    const data = JSON.parse(byId("rlvr-data").textContent);
    state.followLatest = Boolean(data.live);
    wireGroups();
    initExplainer(data.explainer);
    render(data);
    if (data.live) { setStatus("live: polling every 2 s"); setTimeout(poll, 2000); }
  }
  window.rlvrViz = {grpoAdvantages, ppoClip, klK3};
  start();
})();
