/* rlvr report / dashboard: explainer views 3 (temperature -> diversity -> signal), 4 (reward hacking) and 9 (KL
 * over training and beta). They draw measured numbers (a temperature sweep, verifier verdicts, KL curves) and
 * compute nothing of their own; views 11 and 12 are in explainer_credit.js. */
(() => {
  "use strict";
  const V = window.rlvrViz, {el, clear, fmt, show} = V;
  const finite = (v) => typeof v === "number" && isFinite(v);
  const say = (body, text, cls) => body.appendChild(el("p", {"class": cls || "ex-empty"}, text));
  const extent = (values, lo, hi) => {  // a y range holding every value, from lo (and up to hi) at least
    const ok = values.filter(finite);
    const min = Math.min(lo ?? Infinity, ...ok), max = Math.max(hi ?? -Infinity, ...ok);
    return max > min ? {min, max} : {min: min - 1, max: min + 1};
  };
  /* A vertical line at x (the run's own setting) with a visible "this run" label. plot() keeps its scales to
   * itself, so the label takes its x from the line's path ("M x,y L x,y"). */
  function runMark(svg, text) {
    const path = svg.querySelector("path[data-key='this-run']");
    const m = path && /^M([\d.-]+),/.exec(path.getAttribute("d") || "");
    if (m) svg.appendChild(el("svg:text", {x: Number(m[1]) + 4, y: 24, "class": "run-label"}, text));
  }

  // ---- 3. temperature -> diversity -> signal --------------------------------------------------------------------
  const T_METRICS = [["distinct_answers", "distinct answers per group"], ["tied_share", "share of tied groups"],
                     ["mean_abs_advantage", "mean |A|"]];
  function temperaturePlot(rows, metric, label, selected, runT, groupSize) {
    const ts = rows.map((r) => r.temperature), values = rows.map((r) => r[metric]);
    const y = metric === "tied_share" ? {min: 0, max: 1} :
      extent(values, 0, metric === "distinct_answers" ? groupSize : 1);
    const lines = [{key: metric, points: rows.map((r) => [r.temperature, r[metric]])}];
    if (finite(runT)) lines.push({key: "this-run", cls: "run-mark", points: [[runT, y.min], [runT, y.max]],
                                  label: `this run: T = ${runT}`});
    const dots = rows.map((r, j) => ({key: `${metric}-${j}`, x: r.temperature, y: r[metric], r: 3,
                                      label: `T = ${r.temperature}: ${fmt(r[metric], 3)}`}));
    dots.push({key: "selected", cls: "selected", x: rows[selected].temperature, y: rows[selected][metric], r: 6});
    const svg = V.plot({id: "temperature-" + metric, width: 300, height: 200, lines, dots, y: {...y, label},
                        x: {...extent([...ts, runT]), label: "temperature T"}});
    runMark(svg, "this run");
    return svg;
  }
  function temperature(body, ctx) {
    const part = ctx.data.temperature, settings = ctx.data.settings || {};
    V.sourceNote(body, part);
    if (!part) return;
    const rows = (Array.isArray(part.rows) ? part.rows : []).filter((r) => r && finite(r.temperature))
      .sort((a, b) => a.temperature - b.temperature);
    if (!rows.length) return say(body, "The recorded temperature sweep holds no rows: nothing to draw.");
    const runT = settings.temperature, G = part.group_size;
    body.appendChild(el("p", {}, "Slide the sampling temperature. At a low T the model writes nearly the same " +
      "answer G times, the group's rewards tie and GRPO gets no signal (A = 0). Raising T spreads the answers " +
      "and the advantages grow; too high and the answers turn to noise and the rewards fall. " +
      `Measured: ${part.prompts ?? "?"} prompts x G = ${G ?? "?"} samples at each T, up to ` +
      `${part.max_new_tokens ?? "?"} new tokens.`));
    let start = 0;  // the measured T nearest the run's own
    const off = (j) => Math.abs(rows[j].temperature - runT);
    rows.forEach((r, j) => { if (off(j) < off(start)) start = j; });
    const plots = el("div", {"class": "ex-small-plots", id: "temperature-plots"});
    const readout = el("p", {"class": "ex-readout", id: "temperature-readout"});
    const draw = (i) => {
      clear(plots);
      T_METRICS.forEach(([key, label]) => plots.appendChild(temperaturePlot(rows, key, label, i, runT, G)));
      clear(readout).append("At T = ", show(el("b", {id: "temperature-t"}), rows[i].temperature), ": ",
        show(el("b", {id: "temperature-distinct_answers"}), rows[i].distinct_answers), " distinct answers per group, ",
        show(el("b", {id: "temperature-tied_share"}), rows[i].tied_share), " of the groups tied, mean |A| ",
        show(el("b", {id: "temperature-mean_abs_advantage"}), rows[i].mean_abs_advantage), ", mean reward ",
        show(el("b", {id: "temperature-reward_mean"}), rows[i].reward_mean), ".");
    };
    const slider = V.slider({id: "temperature-slider", label: "temperature T", min: 0, max: rows.length - 1, step: 1,
                             value: start, onInput: (i) => draw(i), format: (i) => fmt(rows[i].temperature)});
    body.append(slider.node, el("span", {"class": "muted", id: "temperature-run"}, finite(runT) ?
      `this run samples at T = ${runT} (the dashed line)` : "this run's temperature is not known"), readout, plots);
    draw(start);
  }
  V.addView({id: "temperature", order: 3, title: "Temperature -> diversity -> signal", build: temperature,
             parts: ["temperature", "settings"]});

  // ---- 4. reward hacking --------------------------------------------------------------------------------------
  const CHECKS = [["format", "format regex: an 'Answer: <number>' line"],
                  ["last_number", "the last number equals the reference"]];
  const pays = (v) => finite(v) && v > 0;
  function hackCard(c, i, check) {
    const card = el("div", {"class": "ex-hack card", id: "hacks-case-" + i, "data-kind": c.kind});
    card.append(el("div", {"class": "meta"}, `${c.kind} (${c.source === "real" ? "the embedded model wrote it" :
                                                            "from the attack tests"})`),
                el("div", {"class": "question"}, `${c.question}  (reference: ${c.reference})`),
                el("pre", {"class": "ex-completion"}, c.completion));
    const naive = (c.naive || {})[check], rlvr = c.rlvr || {};
    const row = el("div", {"class": "ex-verdicts"});
    row.append(el("span", {}, "naive check pays "),
               show(el("b", {id: "hacks-naive-" + i, "class": pays(naive) ? "paid" : "unpaid"}), naive ?? "?"),
               el("span", {}, "; rlvr: " + (rlvr.outcome || "?") + ", reward "),
               show(el("b", {id: "hacks-rlvr-" + i, "class": pays(rlvr.reward) ? "paid" : "unpaid"}),
                    rlvr.reward ?? "?"));
    card.append(row, el("div", {"class": "meta ex-detail"}, rlvr.detail || ""));
    return card;
  }
  function hackControls(kinds, onChange) {
    const box = el("div", {"class": "controls ex-controls"});
    const switchBox = el("span", {"class": "switch", role: "radiogroup"});
    CHECKS.forEach(([key, label], j) => {
      const input = el("input", {type: "radio", name: "hacks-check", id: "hacks-check-" + key, value: key});
      input.checked = j === 0;
      input.addEventListener("change", onChange);
      const lab = el("label", {"for": input.id});
      lab.append(input, " " + label);
      switchBox.appendChild(lab);
    });
    const select = el("select", {id: "hacks-kind"});
    ["all", ...kinds].forEach((k) => select.appendChild(el("option", {value: k}, k === "all" ? "every kind" : k)));
    select.addEventListener("change", onChange);
    const kindLabel = el("label", {}, "kind ");
    kindLabel.appendChild(select);
    box.append(el("span", {}, "naive check: "), switchBox, kindLabel);
    return box;
  }
  function hacks(body, ctx) {
    const part = ctx.data.hacks;
    V.sourceNote(body, part);
    if (!part) return;
    const cases = (Array.isArray(part.cases) ? part.cases : []).filter((c) => c && typeof c === "object");
    if (!cases.length) return say(body, "The recording holds no hacking cases: nothing to draw.");
    body.appendChild(el("p", {}, "A reward that only checks the form of an answer can be gamed. Each card is a " +
      "completion that a naive check pays: real ones the embedded model wrote when trained on a format-only " +
      "reward, and the forms of rlvr's attack tests (the last number spammed, hedged answers, a format with a " +
      "wrong number). Switch the naive check and compare its pay with rlvr's verifier, which reads one final " +
      "answer and rejects hedges."));
    const summary = el("p", {"class": "ex-readout", id: "hacks-summary"}), cards = el("div", {"class": "cards"});
    const kinds = [...new Set(cases.map((c) => c.kind))];
    const draw = () => {
      const check = body.querySelector("input[name='hacks-check']:checked").value;
      const kind = body.querySelector("#hacks-kind").value;
      const shown = cases.map((c, i) => [c, i]).filter(([c]) => kind === "all" || c.kind === kind);
      clear(cards);
      shown.forEach(([c, i]) => cards.appendChild(hackCard(c, i, check)));
      clear(summary).append("The naive check pays ",
        show(el("b", {id: "hacks-naive-paid"}), shown.filter(([c]) => pays((c.naive || {})[check])).length), " of ",
        show(el("b", {id: "hacks-shown"}), shown.length), " completions; rlvr pays ",
        show(el("b", {id: "hacks-rlvr-paid"}), shown.filter(([c]) => pays((c.rlvr || {}).reward)).length), ".");
    };
    body.append(hackControls(kinds, draw), summary, cards);
    draw();
  }
  V.addView({id: "hacks", order: 4, title: "Reward hacking", build: hacks, parts: ["hacks"]});

  // ---- 9. KL over training and beta ---------------------------------------------------------------------------
  const klHidden = new Set();  // recorded betas the reader switched off; kept when a dashboard redraws the view
  const klScale = {log: true};  // a log axis by default: the KL spans decades (a first step at mu = 2 reaches ~7)
  function klPlot(run, recorded, beta) {
    const curves = [];
    if (run.steps.length) curves.push({key: "run", cls: "kl-run", steps: run.steps, kl: run.kl,
                                       label: `this run (beta = ${beta})`});
    recorded.forEach((r, j) => {
      if (!klHidden.has(String(r.beta))) curves.push({key: `beta-${r.beta}`, cls: `kl-rec kl-rec-${j}`, steps: r.steps,
                                                     kl: r.kl, label: `recorded, beta = ${r.beta}`});
    });
    const xs = curves.flatMap((c) => c.steps), ys = curves.flatMap((c) => c.kl);
    const dot = (c, s, i) => ({key: c.key, cls: c.cls, x: s, y: c.kl[i], r: 2.5,
                               label: `${c.label}, step ${s}: ${fmt(c.kl[i])}`});
    const positive = ys.filter((v) => finite(v) && v > 0);
    const y = klScale.log && positive.length ?
      {min: Math.max(Math.min(...positive), 1e-4), max: Math.max(...positive) * 1.2, log: true,
       label: "KL to the reference (log scale; 0 drawn at the bottom)"} :
      {...extent(ys, 0), label: "KL to the reference"};
    return V.plot({id: "kl", width: 560, height: 260, x: {...extent(xs.length ? xs : [0, 1]), label: "step"}, y,
                   lines: curves.map((c) => ({key: c.key, cls: c.cls, label: c.label,
                                              points: c.steps.map((s, i) => [s, c.kl[i]])})),
                   dots: curves.flatMap((c) => c.steps.map((s, i) => dot(c, s, i)))});
  }
  function kl(body, ctx) {
    const part = ctx.data.kl, beta = (ctx.data.settings || {}).beta;
    V.sourceNote(body, part);
    if (!part) return;
    const run = part.run && Array.isArray(part.run.steps) ? part.run : {steps: [], kl: []};
    const recorded = (Array.isArray(part.recorded) ? part.recorded : []).filter((r) => r && Array.isArray(r.steps));
    body.appendChild(el("p", {}, "The KL term (beta times the distance to the reference model) pulls the policy " +
      "back toward where it started. Switch the recorded runs on and off: with beta = 0 nothing pulls back; a " +
      "larger beta holds the KL smaller. These runs are short and noisy: read the trend, not one step. The run's own " +
      "curve is labelled with its beta."));
    if (!run.steps.length) say(body, "This run's metrics hold no KL values: only the recorded runs are drawn.");
    const checks = el("div", {"class": "controls ex-controls", id: "kl-checks"});
    const chart = el("div", {"class": "ex-chart", id: "kl-chart"});
    const draw = () => chart.replaceChildren(klPlot(run, recorded, beta));
    recorded.forEach((r, j) => {
      const input = el("input", {type: "checkbox", id: `kl-beta-${j}`, "data-beta": r.beta});
      input.checked = !klHidden.has(String(r.beta));
      input.addEventListener("change", () => { klHidden[input.checked ? "delete" : "add"](String(r.beta)); draw(); });
      const label = el("label", {"for": input.id, "class": `kl-key kl-rec-${j}`});
      label.append(input, ` recorded, beta = ${r.beta}`);
      checks.appendChild(label);
    });
    if (run.steps.length) checks.appendChild(el("span", {"class": "kl-key kl-run", id: "kl-run-label"},
                                                `this run, beta = ${beta ?? "?"}`));
    const log = el("input", {type: "checkbox", id: "kl-log"});
    log.checked = klScale.log;
    log.addEventListener("change", () => { klScale.log = log.checked; draw(); });
    const logLabel = el("label", {"for": "kl-log"});
    logLabel.append(log, " log scale");
    checks.appendChild(logLabel);
    body.append(checks, chart);
    if (recorded.length) {
      say(body, `Recorded on the embedded model: ${recorded[0].steps.length} steps each at the default clip epsilon ` +
          `and G, ${part.updates_per_batch ?? "?"} updates per batch.` + (part.measure_only_beta ? " The beta = 0 " +
          `runs were trained at beta = ${part.measure_only_beta}: beta = 0 loads no reference model, so its KL ` +
          "would not be measured; this one loads it and adds no penalty worth the name." : ""), "muted");
    } else {
      say(body, "No recorded runs at other betas are shipped: only this run is drawn.", "muted");
    }
    draw();
  }
  V.addView({id: "kl", order: 9, title: "KL over training and beta", build: kl,
             refresh: (body, ctx) => { clear(body); kl(body, ctx); }});
})();
