/* rlvr report / dashboard: explainer views 11 (outcome vs process reward: an agent episode's turns coloured by
 * the credit each scheme gives them, with the ports of grpo_advantages and process_advantages) and 12 (tune it
 * yourself: sliders over a grid of short real runs on the embedded model). */
(() => {
  "use strict";
  const V = window.rlvrViz, {el, clear, fmt, show} = V;
  const finite = (v) => typeof v === "number" && isFinite(v);
  const say = (body, text, cls) => body.appendChild(el("p", {"class": cls || "ex-empty"}, text));

  // ---- 11. outcome vs process reward --------------------------------------------------------------------------
  /* The credit of every model turn of every episode, as the trainer gives it (rlvr/grpo/estimators.py
   * TurnCreditEstimator): outcome = the episode's GRPO advantage, on each of its turns; process = that plus
   * episode.process_weight times the turn's process advantage (turns.process_advantages: step rewards normalized
   * over the whole group, summed to the end of the episode; DeepSeekMath 2024, sec. 4.1.3). Episodes without a
   * reward (unscorable) get 0 in both, as the trainer masks them; the statistics pool the scorable ones. */
  function credits(episodes, eps, weight) {
    const scorable = episodes.map((c) => finite(c.reward));
    const outcomeOf = V.grpoAdvantages(episodes.filter((c, i) => scorable[i]).map((c) => c.reward), eps).advantages;
    let k = 0;
    const outcome = scorable.map((ok) => (ok ? outcomeOf[k++] : 0));
    const steps = episodes.map((c) => (c.episode.turn_rewards || []).map(Number));
    const processTerm = V.processAdvantages(steps, eps).map((row, i) => row.map((a) => (scorable[i] ? a : 0)));
    return {outcome, steps, process: processTerm.map((row, i) => row.map((a) => outcome[i] + weight * a))};
  }
  function turnBlocks(messages, values, steps, scale) {
    const box = el("div", {"class": "ex-turns", id: "process-turns"});
    let t = 0;
    messages.forEach((m) => {
      const model = m.role === "assistant";
      const block = el("div", {"class": "ex-turn " + (model ? "model" : "env"), "data-role": m.role});
      const head = el("div", {"class": "ex-turn-head"}, model ? `model turn ${t + 1}` : `${m.role} (environment)`);
      if (model) {
        const v = values[t] ?? 0, alpha = 0.12 + 0.6 * Math.min(1, Math.abs(v) / scale);
        block.classList.add(v > 0 ? "pos" : v < 0 ? "neg" : "zero");
        block.setAttribute("data-turn", t);
        block.setAttribute("data-value", v);
        block.style.background = v > 0 ? `rgba(37, 99, 235, ${alpha})` : v < 0 ? `rgba(220, 38, 38, ${alpha})` : "";
        head.append(": credit ", show(el("b", {"class": "ex-credit"}), v),
                    t < steps.length ? `, step reward ${fmt(steps[t])}` : ", no step reward");
        t++;
      }
      block.append(head, el("pre", {}, m.content));
      box.appendChild(block);
    });
    return box;
  }
  function processControls(episodes, runCredit, onChange) {
    const box = el("div", {"class": "controls ex-controls"});
    const select = el("select", {id: "process-episode"});
    episodes.forEach((c, i) => select.appendChild(el("option", {value: i},
                                                     `episode ${i + 1}: reward ${fmt(c.reward)}`)));
    select.addEventListener("change", onChange);
    const label = el("label", {}, "episode ");
    label.appendChild(select);
    const modes = el("span", {"class": "switch", role: "radiogroup"});
    ["outcome", "process"].forEach((mode) => {
      const input = el("input", {type: "radio", name: "process-mode", id: "process-mode-" + mode, value: mode});
      input.checked = mode === (runCredit === "process" ? "process" : "outcome");
      input.addEventListener("change", onChange);
      const lab = el("label", {"for": input.id});
      lab.append(input, ` ${mode} credit` + (mode === runCredit ? " (this run)" : ""));
      modes.appendChild(lab);
    });
    box.append(label, modes);
    return box;
  }
  function processView(body, ctx) {
    const part = ctx.data.process, settings = ctx.data.settings || {};
    V.sourceNote(body, part);
    if (!part) return;
    const group = part.group || {}, eps = part.std_epsilon ?? settings.std_epsilon;
    const episodes = (group.completions || []).filter((c) => c.episode && Array.isArray(c.episode.messages));
    if (!episodes.length || !finite(eps)) return say(body, "This group holds no episodes with turns: nothing to draw.");
    body.appendChild(el("p", {}, "An agent answers in turns: model turns (coloured) and the environment's replies " +
      "(grey). With outcome credit every model turn of an episode gets the same number, its group advantage, " +
      "whether the turn helped or not. Process credit adds each turn's own step reward, normalized over the group " +
      "and summed to the end of the episode, so a good tool call in a failed episode is blamed less. Pick an " +
      "episode and switch between the two."));
    if (part.source === "run" && settings.advantage && settings.advantage !== "grpo") {
      say(body, `This run's outcome advantage is ${settings.advantage}; the view computes GRPO's.`, "muted");
    }
    // episode.process_weight; the recorded example's part names none: it trained at the default, 1
    const weight = finite(part.process_weight) ? part.process_weight : 1;
    if (weight !== 1 && part.credit === "process") {  // an outcome-credit run has no process term to weigh
      say(body, `This run weighs the process term by episode.process_weight = ${V.fmt(weight)}.`, "muted");
    }
    if (part.process_reward) {  // the trainer adds the scorer's turn scores; groups.jsonl keeps the environment's
      say(body, `This run adds the step scorer's scores (episode.process_reward) to each turn's reward; the log ` +
                "keeps the environment's turn rewards only, so the process credit drawn here leaves the scorer out.",
          "muted");
    }
    const c = credits(episodes, eps, weight);
    const scale = Math.max(1e-9, ...c.outcome.map(Math.abs), ...c.process.flat().map(Math.abs));
    const head = el("p", {"class": "ex-readout", id: "process-readout"}), turns = el("div");
    const draw = () => {
      const i = Number(body.querySelector("#process-episode").value);
      const mode = body.querySelector("input[name='process-mode']:checked").value;
      const modelTurns = episodes[i].episode.messages.filter((m) => m.role === "assistant").length;
      const values = mode === "outcome" ? Array(modelTurns).fill(c.outcome[i]) :
        Array.from({length: modelTurns}, (_, t) => c.process[i][t] ?? c.outcome[i]);
      clear(head).append(`Episode ${i + 1} of ${episodes.length}: reward ${fmt(episodes[i].reward)}, outcome ` +
                         "advantage ", show(el("b", {id: "process-outcome"}), c.outcome[i]),
                         ` (question: ${group.question || "?"}).`);
      turns.replaceChildren(turnBlocks(episodes[i].episode.messages, values, c.steps[i], scale));
    };
    body.append(processControls(episodes, part.credit, draw), head, turns);
    draw();
  }
  V.addView({id: "process", order: 11, title: "Outcome vs process reward", build: processView,
             parts: ["process", "settings"]});

  // ---- 12. tune it yourself -------------------------------------------------------------------------------------
  const AXES = [["clip_epsilon", "clip epsilon"], ["beta", "beta"], ["group_size", "G"]];
  const CURVES = [["reward_mean", "mean reward"], ["kl", "KL"], ["clip_fraction", "clipped share of tokens"]];
  // The trainer's defaults (part.defaults, from AlgorithmConfig and RolloutConfig): the grey comparison run, where
  // the grid holds it, and where a slider opens when the run's own value is not a grid value.
  const last = (cell, key) => (cell.curves[key] || []).at(-1) ?? "?";
  const cellAt = (cells, pick) => cells.find((c) => AXES.every(([k]) => c[k] === pick[k]));
  function axisSlider(key, label, values, runValue, defaults, onInput) {
    const own = values.indexOf(runValue), start = own >= 0 ? own : Math.max(0, values.indexOf(defaults[key]));
    const s = V.slider({id: "grid-" + key, label, min: 0, max: values.length - 1, step: 1, value: start, onInput,
                        format: (i) => fmt(values[i])});
    const marks = el("span", {"class": "ex-marks", id: `grid-${key}-marks`});
    values.forEach((v) => marks.appendChild(el("span", {"class": v === runValue ? "run" : "", "data-value": v},
                                                v === runValue ? `${fmt(v)} (this run)` : fmt(v))));
    const box = el("div", {"class": "ex-axis"});
    box.append(s.node, marks);
    return {node: box, value: () => values[s.value()]};
  }
  function gridPlot(cells, key, label, cell, base) {
    const all = cells.flatMap((c) => (c.curves[key] || []).filter(finite));
    const steps = cells.flatMap((c) => c.curves.steps);
    const lo = Math.min(0, ...all), hi = Math.max(...all, lo + 1e-9);
    const ys = (c) => c.curves[key] || [];
    const curve = (c, name, cls) => ({key: name, cls, points: c.curves.steps.map((s, i) => [s, ys(c)[i]])});
    const lines = [], dots = [];
    [[base, "default", "grid-default"], [cell, "cell", "grid-cell"]].forEach(([c, name, cls]) => {
      if (!c) return;
      lines.push(curve(c, name, cls));
      c.curves.steps.forEach((s, i) => dots.push({key: name, cls, x: s, y: ys(c)[i], r: 3,
                                                   label: `step ${s}: ${fmt(ys(c)[i])}`}));
    });
    return V.plot({id: "grid-" + key, width: 300, height: 200, lines, dots, y: {min: lo, max: hi, label},
                   x: {min: Math.min(...steps), max: Math.max(...steps), label: "step"}});
  }
  function grid(body, ctx) {
    const part = ctx.data.grid, settings = ctx.data.settings || {};
    V.sourceNote(body, part);
    if (!part) return;
    const drawable = (c) => c && c.curves && Array.isArray(c.curves.steps) && c.curves.steps.length;
    const cells = (Array.isArray(part.cells) ? part.cells : []).filter(drawable);
    const axes = part.axes || {}, defaults = part.defaults || {};
    if (!cells.length || AXES.some(([k]) => !Array.isArray(axes[k]) || !axes[k].length)) {
      return say(body, "The recorded grid holds no runs: nothing to draw.");
    }
    body.appendChild(el("p", {}, `Each point of this grid is a real training run of the embedded model: ` +
      `${part.steps ?? "?"} steps, ${part.updates_per_batch ?? "?"} updates per batch (so that the clip can bind), ` +
      "one seed each. Move the sliders to pick a run; the grey curve is the default setting. Notice how beta holds " +
      "the KL down, how a smaller clip epsilon clips more tokens, and how little a few steps can tell: these runs " +
      "are short, so small differences are noise."));
    const plots = el("div", {"class": "ex-small-plots", id: "grid-plots"});
    const readout = el("p", {"class": "ex-readout", id: "grid-readout"});
    const compare = el("input", {type: "checkbox", id: "grid-compare"});
    compare.checked = true;
    const draw = () => {
      const pick = Object.fromEntries(AXES.map(([k], j) => [k, sliders[j].value()]));
      const cell = cellAt(cells, pick), base = compare.checked ? cellAt(cells, defaults) : null;
      clear(readout);
      if (!cell) {
        readout.textContent = "This combination was not recorded.";
      } else {
        readout.append(`clip epsilon ${fmt(pick.clip_epsilon)}, beta ${fmt(pick.beta)}, G ${pick.group_size}: ` +
                       "final mean reward ", show(el("b", {id: "grid-final-reward"}), last(cell, "reward_mean")),
                       ", final KL ", show(el("b", {id: "grid-final-kl"}), last(cell, "kl")),
                       `; this run took ${fmt(cell.seconds, 3)} s to record.`);
      }
      const grey = base === cell ? null : base;
      plots.replaceChildren(...CURVES.map(([k, label]) => gridPlot(cells, k, label, cell, grey)));
    };
    const sliders = AXES.map(([k, label]) => axisSlider(k, label, axes[k], settings[k], defaults, draw));
    compare.addEventListener("change", draw);
    const compareLabel = el("label", {"for": "grid-compare"});
    compareLabel.append(compare, " show the default setting in grey");
    body.append(...sliders.map((s) => s.node), compareLabel, readout, plots);
    draw();
  }
  V.addView({id: "grid", order: 12, title: "Tune it yourself", build: grid, parts: ["grid", "settings"]});
})();
