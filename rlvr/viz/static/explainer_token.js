/* rlvr report / dashboard: explainer views 7 (token by token), 8 (policy ratio explorer), 10 (credit assignment)
 * and 13 (one token's loss, step by step). Every number is either one the trainer recorded for the group view
 * (groups.jsonl: per-token advantages, the ratio after the step's update, the loss's KL estimate) or comes from a
 * port in explainer.js (ppoClip, grpoAdvantages). View 7 tells view 13 which token the reader clicked with a
 * "rlvr-token" event on document ({completion, token}). */
(() => {
  "use strict";
  const V = window.rlvrViz, {el, clear, show, fmt} = V;
  const PICK = "rlvr-token";
  const RATIO_MISSING = "no ratio recorded for this token: the run sampled with top-p < 1 (pi_old is then not " +
    "known exactly), ran sharded (torchrun: no rank can rescore alone), or was logged before ratios were recorded";
  const KL_MISSING = "not recorded: beta = 0 or KL in the reward, or a run from before this was logged";
  const ENV_TOKEN = "an environment token (a tool's or the user's turn inside an episode): the model did not " +
    "sample it, so it has no ratio and adds nothing to the loss.";
  // what the reader picked, kept across a dashboard's redraws (views 7, 10 and 13)
  const state = {token: {completion: 0, token: null}, credit: 0, worked: null};

  const completionsOf = (part) => (part && part.group && Array.isArray(part.group.completions) ?
                                   part.group.completions : []);
  const trained = (c, k) => !c.sampled || Boolean(c.sampled[k]);  // an episode's environment tokens are not
  const trainedCount = (c) => c.tokens.filter((_, k) => trained(c, k)).length;
  const known = (v) => typeof v === "number" && isFinite(v);
  function note(body, text) { body.appendChild(el("p", {"class": "ex-note muted"}, text)); }
  function objectiveNote(body, settings) {  // GSPO, CISPO and dual clip weigh a token otherwise: say so, not hide it
    const o = (settings || {}).objective;
    if (o && o !== "ppo_clip") {
      note(body, `This run trains with the ${o} objective; the numbers below take each token through PPO's ` +
                 `clipped objective (ppo_clip), GRPO's own, so they show the idea rather than ${o}'s exact term.`);
    }
  }
  function teach(body, text) { body.appendChild(el("p", {"class": "ex-teach"}, text)); }
  function advantageColour(a, scale) {  // as the group view colours them: blue pushed up, red pushed down
    if (!a) return "transparent";
    const alpha = (0.12 + 0.55 * Math.min(Math.abs(a) / scale, 1)).toFixed(3);
    return a > 0 ? `rgba(37, 99, 235, ${alpha})` : `rgba(220, 38, 38, ${alpha})`;
  }
  function completionSelect(id, list, value, onChange) {
    const select = el("select", {id});
    list.forEach((c, i) => select.appendChild(el("option", {value: i},
      `completion ${i + 1}: reward ${fmt(c.reward)}, advantage ${fmt(c.advantage, 3)}`)));
    select.value = String(value);
    select.addEventListener("change", () => onChange(parseInt(select.value, 10)));
    const label = el("label", {"class": "ex-pick"}, "completion ");
    label.appendChild(select);
    return label;
  }
  /* A line of text pieces and numbers: ["text", [id, value], ...]; each number through show() (data-value). */
  function numberLine(box, pieces, cls) {
    const line = el("div", {"class": "ex-step " + (cls || "")});
    pieces.forEach((p) => line.appendChild(Array.isArray(p) ?
      show(el("span", {id: p[0], "class": "ex-num"}), p[1]) : document.createTextNode(p)));
    box.appendChild(line);
    return line;
  }
  const same = (a, b) => (a && a.source) === (b && b.source) && (a && a.made) === (b && b.made);

  // ---- one token through the loss (views 7 and 13) -------------------------------------------------------------
  /* The weight a token's loss gets in the step's loss (rlvr.algorithms.loss.AGGREGATIONS), over the shown group
   * only: the trainer's denominator runs over the whole batch, of which this group is one part. */
  function tokenWeight(list, i, settings) {
    const g = list.length, own = trainedCount(list[i]);
    if (settings.aggregation === "sequence_mean") {
      return {weight: 1 / (g * own), how: `sequence_mean: 1 / (G × |o_i|) = 1 / (${g} × ${own})`};
    }
    if (settings.aggregation === "token_mean") {
      const total = list.reduce((a, c) => a + trainedCount(c), 0);
      return {weight: 1 / total, how: `token_mean: 1 / (tokens of the group) = 1 / ${total}`};
    }
    if (settings.aggregation === "constant") {
      return {weight: 1 / (g * settings.max_new_tokens),
              how: `constant: 1 / (G × max_new_tokens) = 1 / (${g} × ${settings.max_new_tokens})`};
    }
    return {weight: NaN, how: `the aggregation "${settings.aggregation}" is not one this page knows`};
  }
  function tokenTerms(part, settings, i, k) {
    const list = completionsOf(part), c = list[i], group = part.group;
    const ratio = c.token_ratios ? c.token_ratios[k] : null, kl = c.token_kl ? c.token_kl[k] : null;
    const t = {i, k, text: c.tokens[k], trained: trained(c, k), ratio, adv: c.token_advantages[k], kl,
               beta: settings.beta, low: group.clip_low, high: group.clip_high, ...tokenWeight(list, i, settings)};
    if (known(ratio)) {
      t.clipRatio = V.ppoClip(ratio, 1, t.low, t.high).clippedTerm;  // clip(rho) is the clipped term at A = 1
      t.surrogate = V.ppoClip(ratio, t.adv, t.low, t.high);
      t.klTerm = known(kl) ? t.beta * kl : null;
      t.total = t.surrogate.loss + (t.klTerm ?? 0);
      t.contribution = t.total * t.weight;
    }
    return t;
  }
  function firstWithRatio(list) {
    for (let i = 0; i < list.length; i++) {
      const k = (list[i].token_ratios || []).findIndex((r, j) => known(r) && trained(list[i], j));
      if (k >= 0) return {completion: i, token: k};
    }
    return null;
  }

  /* Views 7 and 13 open alike: where the group comes from, what to say without one, the objective's caveat.
   * Returns the group's completions (none: the view has said why and stops). */
  function opening(body, ctx, empty) {
    const part = ctx.data.group, list = completionsOf(part);
    V.sourceNote(body, part);
    if (!list.length) {
      note(body, empty);
    } else {
      objectiveNote(body, part.settings || ctx.data.settings);
    }
    return list;
  }

  // ---- view 7: token by token -----------------------------------------------------------------------------------
  function buildToken(body, ctx) {
    const part = ctx.data.group;
    const list = opening(body, ctx, "No logged group of completions to take apart token by token.");
    if (!list.length) return;
    teach(body, "Pick a completion and click any of its tokens (coloured by advantage: blue pushed up, red " +
      "pushed down). The panel takes that token through the loss with the numbers the trainer recorded: its ratio, " +
      "its advantage, the clipped term, the KL term, and its share of the step's loss. Notice how many tokens sit " +
      "at ratio near 1, and which ones the clip stops.");
    body.appendChild(el("div", {"class": "question"}, "Prompt: " + part.group.question));
    const strip = el("div", {id: "token-strip", "class": "tokens ex-tokens"});
    const details = el("div", {id: "token-details", "class": "ex-details"});
    const at = Math.min(state.token.completion, list.length - 1);
    const draw = (i) => { state.token = {completion: i, token: null}; drawStrip(strip, details, part, ctx, i); };
    body.append(completionSelect("token-completion", list, at, draw), strip, details);
    const token = state.token.token;
    drawStrip(strip, details, part, ctx, at);
    if (token !== null && token < list[at].tokens.length) pickToken(strip, details, part, ctx, at, token);
  }
  function drawStrip(strip, details, part, ctx, i) {
    const c = completionsOf(part)[i];
    // a loop, not Math.max(...): a long group's 100k+ tokens would overflow the call's argument stack
    const scale = completionsOf(part).reduce(
      (m, c) => c.token_advantages.reduce((n, a) => Math.max(n, Math.abs(a)), m), 0) || 1;
    clear(strip);
    c.tokens.forEach((text, k) => {
      const span = el("span", {"class": "tok" + (trained(c, k) ? "" : " env"), id: "token-tok-" + k,
                               "data-index": k, role: "button", tabindex: "0"}, text);
      if (trained(c, k)) span.style.backgroundColor = advantageColour(c.token_advantages[k], scale);
      span.addEventListener("click", () => pickToken(strip, details, part, ctx, i, k));
      span.addEventListener("keydown", (e) => {  // a keyboard reader picks with Enter or Space
        if (e.key === "Enter" || e.key === " ") { e.preventDefault(); pickToken(strip, details, part, ctx, i, k); }
      });
      strip.appendChild(span);
    });
    clear(details).appendChild(el("p", {"class": "muted"}, "Click a token above to see its numbers."));
  }
  function pickToken(strip, details, part, ctx, i, k) {
    strip.querySelectorAll(".tok.picked").forEach((s) => s.classList.remove("picked"));
    strip.querySelector(`[data-index="${k}"]`).classList.add("picked");
    state.token = {completion: i, token: k};
    const settings = part.settings || ctx.data.settings;  // the example's group: the example run's own beta
    drawDetails(clear(details), tokenTerms(part, settings, i, k), settings);
    document.dispatchEvent(new CustomEvent(PICK, {detail: {completion: i, token: k}}));
  }
  function drawDetails(box, t, settings) {
    box.appendChild(el("div", {"class": "ex-token-head"}, `token ${t.k + 1} of completion ${t.i + 1}: "${t.text}"`));
    if (!t.trained) return note(box, ENV_TOKEN);
    if (!known(t.ratio)) {
      numberLine(box, ["ratio rho: ", ["token-ratio", "not recorded"]]);
      note(box, RATIO_MISSING + ". Without it the clipped term cannot be shown.");
    } else {
      numberLine(box, ["ratio rho = pi_new / pi_old = ", ["token-ratio", t.ratio]]);
      note(box, "Measured after this step's update. The step's own first pass saw rho = 1 (pi_old is the " +
                 "policy that sampled), so the clipped term below is what a further pass over the same batch " +
                 "would see.");
    }
    numberLine(box, ["advantage A = ", ["token-adv", t.adv]]);
    if (t.surrogate) {
      numberLine(box, [`clipped term min(rho A, clip(rho, ${fmt(1 - t.low)}, ${fmt(1 + t.high)}) A) = min(`,
                       ["token-unclipped", t.surrogate.unclipped], ", ",
                       ["token-clipped-term", t.surrogate.clippedTerm],
                       ") -> clipped loss = ", ["token-loss", t.surrogate.loss], " (the clip ",
                       ["token-binds", t.surrogate.binds ? "binds: no gradient from this token" : "does not bind"],
                       ")"]);
    }
    if (known(t.kl)) {
      numberLine(box, [`KL term beta × k = ${fmt(t.beta)} × `, ["token-kl", t.kl], ` (${settings.kl_estimator}) = `,
                       ["token-kl-term", t.beta * t.kl]]);
    } else {
      numberLine(box, ["KL term: ", ["token-kl", KL_MISSING]]);
    }
    numberLine(box, ["aggregation weight ", ["token-weight", t.weight], ` (${t.how})`]);
    if (t.surrogate) {
      numberLine(box, [known(t.kl) ? "loss contribution = (clipped loss + beta × k) × weight = " :
                       "loss contribution = clipped loss × weight (no KL term recorded) = ",
                       ["token-contribution", t.contribution]], "ex-total");
    }
    note(box, "The weight is over this group only: the trainer divides by the whole batch, of which the group is " +
               "one part, so the token's share of the real step is smaller by that factor.");
  }

  // ---- view 8: policy ratio explorer ----------------------------------------------------------------------------
  function buildRatio(body, ctx) {
    const s = ctx.data.settings, low = s.clip_epsilon, high = s.clip_epsilon_high;
    V.sourceNote(body, {source: "run", made: `its clip range [1 - eps_low, 1 + eps_high] = [${fmt(1 - low)}, ` +
                                             `${fmt(1 + high)}], shaded`});
    teach(body, "Move the two probabilities of one token: pi_old (the policy that sampled it) and pi_theta (the " +
      "policy being trained). Their ratio rho moves the dots along the per-token objective min(rho A, clip(rho) A) " +
      "for a good token (A = +1) and a bad one (A = -1). Where a curve goes flat the clip binds and the token gives " +
      "no gradient: PPO stops pushing a token further once it has moved far enough (Schulman et al. 2017).");
    const plotBox = el("div", {id: "ratio-plot", "class": "ex-chart"}), readout = el("div", {id: "ratio-readout"});
    const draw = () => drawRatio(plotBox, readout, low, high, old.value(), now.value());
    const old = V.slider({id: "ratio-pi-old", label: "pi_old", min: 0.01, max: 1, step: 0.01, value: 0.4,
                          onInput: draw});
    const now = V.slider({id: "ratio-pi-new", label: "pi_theta", min: 0.01, max: 1, step: 0.01, value: 0.5,
                          onInput: draw});
    const controls = el("div", {"class": "ex-controls"});
    controls.append(old.node, now.node);
    body.append(controls, plotBox, readout);
    draw();
  }
  function drawRatio(plotBox, readout, low, high, piOld, piNew) {
    const rho = piNew / piOld, xmax = Math.max(2, Math.ceil(rho * 2) / 2);  // the axis grows to keep the dot on
    const xs = Array.from({length: 201}, (_, j) => (xmax * j) / 200).concat([1 - low, 1 + high]).sort((a, b) => a - b);
    const objective = (x, a) => -V.ppoClip(x, a, low, high).loss;
    const signs = [["pos", 1, "A = +1"], ["neg", -1, "A = -1"]];
    clear(plotBox).appendChild(V.plot({
      id: "ratio", x: {min: 0, max: xmax, label: "ratio rho = pi_theta / pi_old"},
      y: {min: -xmax, max: Math.ceil((1 + high + 0.1) * 2) / 2, label: "objective"},
      bands: [{x0: 1 - low, x1: 1 + high, key: "clip-range", cls: "ex-clip-band"}],
      lines: signs.map(([key, a, label]) => ({key, cls: key, label, points: xs.map((x) => [x, objective(x, a)])})),
      dots: signs.map(([key, a, label]) => ({key, cls: key, x: rho, y: objective(rho, a), r: 5,
                                              label: `${label}: rho ${fmt(rho)}`}))}));
    clear(readout);
    numberLine(readout, ["rho = ", ["ratio-rho", rho], ` (clip range [${fmt(1 - low)}, ${fmt(1 + high)}])`]);
    signs.forEach(([key, a, label]) => {
      const s = V.ppoClip(rho, a, low, high);
      numberLine(readout, [`${label}: objective min(rho A, clip(rho) A) = `, ["ratio-obj-" + key, -s.loss], "; ",
                           ["ratio-binds-" + key, s.binds ? "the clip binds: gradient 0" : "the gradient flows"]],
                 key);
    });
  }

  // ---- view 10: credit assignment -------------------------------------------------------------------------------
  function buildCredit(body, ctx) {
    const part = ctx.data.credit, list = completionsOf(part);
    V.sourceNote(body, part);
    if (!list.length) return note(body, "No group trained with a critic (PPO with GAE) to compare with.");
    if (!list.every((c) => known(c.reward))) return note(body, "A reward of this group was not recorded.");
    teach(body, "Pick a completion. GRPO gives every token of a completion the same credit, its group-normalised " +
      "reward (outcome supervision, DeepSeekMath 2024). PPO's critic estimates a value at every token, and GAE " +
      "turns the differences of those values into a per-token advantage (Schulman et al. 2016): the credit varies " +
      "along the completion, larger where the critic thinks the outcome was decided.");
    const eps = known(part.std_epsilon) ? part.std_epsilon : ctx.data.settings.std_epsilon;
    const grpo = V.grpoAdvantages(list.map((c) => c.reward), eps);
    const pair = el("div", {"class": "ex-pair"});
    const at = Math.min(state.credit, list.length - 1);
    const draw = (i) => { state.credit = i; drawCredit(pair, list, grpo, i); };
    body.append(completionSelect("credit-completion", list, at, draw), pair);
    draw(at);
  }
  function drawCredit(pair, list, grpo, i) {
    const c = list[i], a = grpo.advantages[i];
    const flat = c.tokens.map((_, k) => (trained(c, k) ? a : 0)), gae = c.token_advantages;
    const lo = Math.min(0, ...flat, ...gae), hi = Math.max(0, ...flat, ...gae);  // one scale for both charts
    const labels = c.tokens.map((t, k) => `token ${k + 1} "${t}"`);
    clear(pair);
    [["credit-grpo", "GRPO (group baseline)", flat], ["credit-gae", "PPO with GAE (critic)", gae]].forEach(
      ([id, title, values]) => {
        const box = el("div", {"class": "ex-chart", id: id + "-box"});
        box.append(el("h4", {}, title), V.bars({id, values, labels, min: lo, max: hi, xlabel: "token",
                                                ylabel: "advantage"}));
        pair.appendChild(box);
      });
    const notes = el("div", {"class": "ex-credit-notes"});
    numberLine(notes, ["GRPO: every token gets ", ["credit-grpo-value", a], " (reward ", ["credit-reward", c.reward],
                       ", group mean ", ["credit-mean", grpo.mean], ", std ", ["credit-std", grpo.std], ")"]);
    numberLine(notes, ["GAE: from ", ["credit-gae-first", gae[0]], " at the first token to ",
                       ["credit-gae-last", gae[gae.length - 1]], " at the last"]);
    pair.appendChild(notes);
  }

  // ---- view 13: one token's loss, step by step ------------------------------------------------------------------
  function buildWorked(body, ctx) {
    const part = ctx.data.group, list = opening(body, ctx, "No logged group, so no token to work through.");
    if (!list.length) return;
    teach(body, "One token's loss, every step with this run's numbers. It starts at the first token with a " +
      "recorded ratio; click a token in view 7 to work through that one instead. Follow the clip: where " +
      "clip(rho) A is the smaller term it wins the min, and the token's gradient is zero.");
    const box = el("div", {id: "worked-steps", "class": "ex-worked"});
    body.appendChild(box);
    state.worked = {box, part, settings: (part.settings || ctx.data.settings)};
    const {completion, token} = state.token, kept = token !== null && completion < list.length &&
      token < list[completion].tokens.length;
    const start = kept ? state.token : firstWithRatio(list);
    if (!start) return note(box, "No token of this group has a recorded ratio: " + RATIO_MISSING + ".");
    drawWorked(start.completion, start.token);
  }
  function drawWorked(i, k) {
    const {box, part, settings} = state.worked, t = tokenTerms(part, settings, i, k);
    clear(box).appendChild(el("div", {"class": "ex-token-head"},
                              `token ${k + 1} of completion ${i + 1}: "${t.text}"`));
    box.firstChild.setAttribute("data-token", `${i}:${k}`);
    if (!t.trained) return note(box, ENV_TOKEN);
    if (!t.surrogate) return note(box, RATIO_MISSING + ".");
    const s = t.surrogate;
    numberLine(box, ["rho = pi_new / pi_old = ", ["worked-rho", t.ratio], " (after the step's update: what a " +
                     "further pass would see)"]);
    numberLine(box, [`clip(rho) = clip(rho, 1 - ${fmt(t.low)}, 1 + ${fmt(t.high)}) = `, ["worked-clip", t.clipRatio]]);
    numberLine(box, ["A = ", ["worked-adv", t.adv]]);
    numberLine(box, ["rho × A = ", ["worked-unclipped", s.unclipped]]);
    numberLine(box, ["clip(rho) × A = ", ["worked-clipped-term", s.clippedTerm]]);
    numberLine(box, ["min(rho × A, clip(rho) × A) = ", ["worked-min", -s.loss], " -> loss = -min = ",
                     ["worked-loss", s.loss], " (", ["worked-binds", s.binds ? "the clip binds: gradient 0" :
                                                      "the clip does not bind"], ")"]);
    if (known(t.kl)) {
      numberLine(box, [`k = KL estimate (${settings.kl_estimator}, at pi_old) = `, ["worked-kl", t.kl]]);
      numberLine(box, [`beta × k = ${fmt(t.beta)} × k = `, ["worked-kl-term", t.klTerm]]);
      numberLine(box, ["total = loss + beta × k = ", ["worked-total", t.total]], "ex-total");
    } else {
      numberLine(box, ["k = ", ["worked-kl", KL_MISSING]]);
      numberLine(box, ["total = loss (no KL term recorded) = ", ["worked-total", t.total]], "ex-total");
    }
    numberLine(box, ["× aggregation weight ", ["worked-weight", t.weight], ` (${t.how}, over this group only) = `,
                     ["worked-contribution", t.contribution]]);
  }
  document.addEventListener(PICK, (e) => { if (state.worked) drawWorked(e.detail.completion, e.detail.token); });

  /* A dashboard's new payload: redraw only when the part drawn changed (a new logged group); the reader's
   * completion and token stay picked where they still exist. */
  function redrawOnChange(build, key) {
    let shown = null;
    return {
      build: (body, ctx) => { shown = ctx.data[key]; build(body, ctx); },
      refresh: (body, ctx) => {
        if (same(shown, ctx.data[key])) return;
        shown = ctx.data[key];
        build(clear(body), ctx);
      },
    };
  }
  V.addView({id: "token", order: 7, title: "Token by token", ...redrawOnChange(buildToken, "group")});
  V.addView({id: "ratio", order: 8, title: "Policy ratio explorer", build: buildRatio, parts: ["settings"]});
  V.addView({id: "credit", order: 10, title: "Credit assignment", ...redrawOnChange(buildCredit, "credit")});
  V.addView({id: "worked", order: 13, title: "One token's loss, step by step",
             ...redrawOnChange(buildWorked, "group")});
})();
