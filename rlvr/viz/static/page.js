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
    {id: "length", title: "Completion length (tokens)",
     keys: ["completion_length", "completion_length_max", "episode/env_tokens_mean"]},
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
    // multi-turn runs only: not listed as missing in a run without episodes
    {id: "episodes", title: "Episodes: valid-call share and stop reasons", episodes: true,
     match: (k) => /^episode\/(valid_call_share|stop_)/.test(k)},
    {id: "episode_turns", title: "Episodes: turns and tool calls per episode", episodes: true,
     keys: ["episode/turns_mean", "episode/calls_mean"]},
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
    let lo = values.reduce((a, v) => Math.min(a, v), Infinity), hi = values.reduce((a, v) => Math.max(a, v), -Infinity);
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
      if (card) grid.appendChild(card); else if (!def.episodes) missing.push(def.title.toLowerCase());
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
        if (c.episode) meta.prepend(episodeMeta(c.episode));
        card.append(el("div", {"class": "question"}, c.question), meta,
                    c.episode ? trajectory(c.episode) : el("pre", {"class": "text"}, c.text));
        row.appendChild(card);
      });
    });
  }
  const episodeMeta = (e) => `${e.model_turns} turns · ${e.valid_calls} valid / ${e.invalid_calls} bad calls · ` +
    `${e.stop_reason} · `;
  function trajectory(e) {  // an episode's turns after the prompt, the environment's grey as in the group view
    const box = el("div", {"class": "trajectory"});
    e.messages.forEach((m) => box.appendChild(el("pre", {"class": "text turn" + (m.role === "assistant" ? "" : " env"),
                                                          "data-role": m.role, title: m.role}, m.content)));
    if (e.final_state) box.appendChild(el("div", {"class": "meta final-state"}, "final state: " + e.final_state));
    return box;
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
    // a loop, not Math.max(...): a long group's 100k+ tokens would overflow the call's argument stack
    const scale = group.completions.reduce((m, c) => c.token_advantages.reduce((n, a) => Math.max(n, Math.abs(a)), m),
                                           0) || 1;
    const episodes = group.completions.some((c) => c.sampled);  // say what the grey tokens are
    legendItems(LEGENDS[state.mode].concat(episodes ? [["#e4e4e4", "environment turn (not trained on)"]] : []));
    group.completions.forEach((c, j) => cards.appendChild(groupCard(group, c, j, scale)));
  }
  function groupCard(group, c, j, scale) {
    const card = el("div", {"class": "card member", "data-index": j, "data-advantage": c.advantage});
    const meta = el("div", {"class": "meta"},
      `#${j + 1} · reward ${fmt(c.reward)} · advantage ${fmt(c.advantage)}${c.truncated ? " · truncated" : ""} ` +
      (c.episode ? "· " + episodeMeta(c.episode) : ""));
    meta.appendChild(verdictBadges(c.verdicts));
    card.appendChild(meta);
    const ratios = state.mode === "ratio" ? c.token_ratios : null;
    if (state.mode === "ratio" && !ratios) {
      card.appendChild(el("p", {"class": "ratio-missing muted"},
                          "token ratios were not recorded for this completion (token_ratios is null)"));
    }
    const body = el("div", {"class": "tokens"});
    let turn = 0;  // an episode's model turn: a sampled token after the environment's starts the next one
    c.tokens.forEach((t, k) => {
      if (c.sampled && !c.sampled[k]) {  // an episode's environment turn: not the model's, no advantage
        body.appendChild(el("span", {"class": "tok env", "title": "environment turn (not trained on)"}, t));
        return;
      }
      const starts = Boolean(c.sampled) && k > 0 && !c.sampled[k - 1];
      turn += starts ? 1 : 0;
      const span = el("span", {"class": "tok" + (starts ? " turn-start" : ""), "data-adv": c.token_advantages[k]}, t);
      if (c.sampled) span.setAttribute("data-turn", turn);
      if (c.token_ratios) span.setAttribute("data-ratio", c.token_ratios[k]);
      span.style.backgroundColor = state.mode === "advantage" ? advantageColour(c.token_advantages[k], scale)
        : (ratios ? ratioColour(ratios[k], c.token_advantages[k], group) : "transparent");
      span.title = (c.sampled ? `model turn ${turn + 1} · ` : "") + `advantage ${fmt(c.token_advantages[k])}` +
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

  function renderRecipes(data) {
    const recipes = data.recipes || [];
    byId("recipe").hidden = recipes.length === 0;
    const list = clear(byId("recipe-list"));
    recipes.forEach((r) => list.append(el("h3", {}, r.name), el("pre", {"class": "recipe-summary"}, r.summary)));
  }

  /* ---- data, live updates ------------------------------------------------------------------------- */
  function render(data) {
    state.data = data;
    renderRecipes(data);
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
        window.rlvrViz.refreshExplainer(state.data);
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
    window.rlvrViz.initExplainer(data);  // explainer.js, inlined before this script
    render(data);
    if (data.live) { setStatus("live: polling every 2 s"); setTimeout(poll, 2000); }
  }
  start();
})();
