/* rlvr report / dashboard: explainer views 1 (group sampling in action), 2 (score your own answer) and 5 (the
 * difficulty sweet spot). Every number they draw comes from a port in explainer.js (grpoAdvantages,
 * tieProbability, expectedAbsAdvantage); the group is ctx.data.group, the pass rates ctx.data.difficulty, and
 * view 2 sends a typed answer to the dashboard's POST api/score (rlvr/viz/dashboard.py). */
(() => {
  "use strict";
  const V = window.rlvrViz, {el, clear, show, fmt} = V;

  // ---- shared pieces -----------------------------------------------------------------------------------------
  /* Verdicts as [{verifier, outcome, score, detail}]: a logged group holds that list, the dashboard's answer to a
   * typed one a {verifier: {outcome, score, detail}} map. */
  function verdictList(verdicts) {
    if (Array.isArray(verdicts)) return verdicts;
    return Object.entries(verdicts || {}).map(([verifier, v]) => ({verifier, ...v}));
  }
  function badges(verdicts) {
    const box = el("span", {"class": "ex-verdicts"}), list = verdictList(verdicts);
    if (!list.length) box.appendChild(el("span", {"class": "badge"}, "no verdicts"));
    list.forEach((v) => box.appendChild(el("span", {"class": "badge outcome-" + v.outcome, title: v.detail || "",
                                                    "data-verifier": v.verifier, "data-outcome": v.outcome},
                                           `${v.verifier}: ${v.outcome}`)));
    return box;
  }
  const outcomes = (verdicts) => verdictList(verdicts).map((v) => v.outcome).join(", ") || "no verdicts";
  const intro = (body, text) => body.appendChild(el("p", {"class": "ex-intro"}, text));
  function ordinal(n) {
    const teen = n % 100 >= 11 && n % 100 <= 13;
    return n + (teen ? "th" : ["th", "st", "nd", "rd"][n % 10] || "th");
  }
  /* "2nd of 9 by reward": 1 + how many rewards beat member i; equal rewards share a place. */
  function rankText(rewards, i) {
    const above = rewards.filter((r) => r > rewards[i]).length;
    const tied = rewards.filter((r) => r === rewards[i]).length - 1;
    return `${ordinal(above + 1)} of ${rewards.length} by reward` +
           (tied ? `, shared with ${tied} other${tied > 1 ? "s" : ""}` : "");
  }
  function output(id, label) {  // "label <output>" for show()
    const span = el("span", {}, label + " ");
    const node = el("output", {id});
    span.appendChild(node);
    return {span, node};
  }
  /* The group part's group, or null after the page says why there is none to draw. */
  function usableGroup(body, ctx) {
    const part = ctx.data.group;
    V.sourceNote(body, part);
    if (!part) return null;
    const group = part.group;
    if (!group || !group.completions.length || group.completions.some((c) => typeof c.reward !== "number")) {
      body.appendChild(el("p", {"class": "muted"}, "This group has an answer without a reward: nothing to compare."));
      return null;
    }
    return group;
  }
  function showQuestion(body, group, settings) {
    const box = el("div", {"class": "ex-question"});
    box.append(el("div", {"class": "question"}, group.question),
               el("div", {"class": "meta"}, `reference answer: ${group.reference}`));
    if (settings && settings.advantage && settings.advantage !== "grpo") {  // the view teaches GRPO's formula
      box.appendChild(el("div", {"class": "meta"}, `this run used the ${settings.advantage} advantage; ` +
                                                   "the view shows GRPO's (r - mean) / (std + eps)"));
    }
    body.appendChild(box);
  }
  const advantageBars = (id, rewards, advantages, mine) => V.bars({
    id, values: advantages, min: -2, max: 2, xlabel: "answer", ylabel: "advantage A",
    labels: rewards.map((r, i) => (i === mine ? "this answer" : `answer ${i + 1}`) + `, reward ${fmt(r)}`),
    cls: (i, v) => (v >= 0 ? "pos" : "neg") + (i === mine ? " mine" : "")});
  /* A dashboard's new payload redraws a view only when key(ctx) changed (a run that starts logging groups, a new
   * pass rate), so a reader's slider is not reset every step; keep(body) reads the controls build restores. */
  function refresher(build, key, keep) {
    return (body, ctx) => {
      if (body.dataset.key === key(ctx)) return;
      const kept = keep(body);
      clear(body);
      build(body, ctx, kept);
    };
  }
  const sliderValue = (body, id) => {
    const input = body.querySelector("#" + id);
    return input ? parseFloat(input.value) : undefined;
  };

  // ---- 1. group sampling in action ---------------------------------------------------------------------------
  function memberCard(c, i) {
    const card = el("div", {"class": "ex-member", "data-index": i});
    const head = el("div", {"class": "meta"}, `answer ${i + 1} · reward ${fmt(c.reward)} · advantage `);
    head.appendChild(el("output", {id: "sampling-adv-" + i}));
    card.append(head, badges(c.verdicts), el("pre", {"class": "ex-text"}, c.text));
    return card;
  }
  function samplingWhy(n, adv, rewards) {
    if (n === 1) {
      return "One answer alone has no one to compare with. GRPO has no learned critic: the group is its own " +
             "baseline (DeepSeekMath, Shao et al. 2024), so a lone answer's reward is the mean and its advantage " +
             "is 0. It teaches nothing.";
    }
    if (adv.tied) {
      return `All ${n} answers got the same reward (${fmt(rewards[0])}): each equals the group mean, so every ` +
             "advantage is 0 and this group teaches nothing. A larger group is more likely to hold both a right " +
             "and a wrong answer.";
    }
    return `The ${n} rewards differ: answers above the mean get a positive advantage (made more likely), ` +
           "answers below it a negative one.";
  }
  function buildSampling(body, ctx, kept) {
    body.dataset.key = samplingKey(ctx);
    const group = usableGroup(body, ctx), settings = ctx.data.settings;
    if (!group) return;
    const G = group.completions.length, eps = settings.std_epsilon;
    intro(body, "GRPO samples a group of answers to one prompt and scores each against the others: its " +
                "advantage is (reward - group mean) / (group std + eps). Move the slider to keep only the first k " +
                "answers and watch every advantage change with the group. At k = 1, or when the k rewards tie, " +
                "all advantages are 0.");
    showQuestion(body, group, settings);
    const k = V.slider({id: "sampling-k", label: "answers in the group, k", min: 1, max: G, step: 1,
                        value: Math.min(kept && kept.k ? kept.k : G, G), format: String, onInput: draw});
    const controls = el("div", {"class": "controls"}), mean = output("sampling-mean", "group mean");
    const std = output("sampling-std", "std (Bessel)");
    controls.append(k.node, el("span", {"class": "ex-mark", id: "sampling-run-g"},
                               `this run samples G = ${settings.group_size}`), mean.span, std.span);
    const why = el("p", {id: "sampling-why", "class": "ex-why"});
    const chart = el("div", {id: "sampling-chart", "class": "ex-chart"});
    const cards = el("div", {id: "sampling-cards", "class": "ex-members"});
    group.completions.forEach((c, i) => cards.appendChild(memberCard(c, i)));
    body.append(controls, why, chart, cards);
    function draw() {
      const n = k.value(), rewards = group.completions.slice(0, n).map((c) => c.reward);
      const adv = V.grpoAdvantages(rewards, eps);
      show(mean.node, adv.mean);
      show(std.node, adv.std);
      why.textContent = samplingWhy(n, adv, rewards);
      why.dataset.tied = adv.tied ? "yes" : "no";
      [...cards.children].forEach((card, i) => {
        const out = card.querySelector("output");
        card.classList.toggle("off", i >= n);
        if (i < n) show(out, adv.advantages[i]);
        else { out.removeAttribute("data-value"); out.textContent = "not in the group"; }
      });
      clear(chart).appendChild(advantageBars("sampling-advantages", rewards, adv.advantages, -1));
    }
    draw();
  }
  const samplingKey = (ctx) => (ctx.data.group ? ctx.data.group.source : "none");
  V.addView({id: "sampling", order: 1, title: "Group sampling in action", build: buildSampling,
             refresh: refresher(buildSampling, samplingKey, (body) => ({k: sliderValue(body, "sampling-k")}))});

  // ---- 2. score your own answer ------------------------------------------------------------------------------
  async function sendAnswer(promptId, completion) {
    let res, answer = null;
    try {
      res = await fetch("api/score", {method: "POST", cache: "no-store", headers: {"Content-Type": "application/json"},
                                      body: JSON.stringify({prompt_id: promptId, completion})});
    } catch (err) {
      throw new Error(`the dashboard does not answer (${err.message})`);
    }
    try { answer = await res.json(); } catch (err) { answer = null; }
    if (!res.ok || !answer || typeof answer.reward !== "number") {
      throw new Error(`the dashboard could not score it: ${(answer && answer.error) || "HTTP " + res.status}`);
    }
    return answer;
  }
  /* One answer placed in a group: its verdicts, reward, advantage and rank among `rewards` (it is member
   * `index`), and the group's bars with it marked. */
  function placeAnswer(result, {label, verdicts, rewards, index, eps}) {
    clear(result);
    const adv = V.grpoAdvantages(rewards, eps), a = adv.advantages[index];
    const head = el("div", {"class": "meta"}, label + " ");
    head.appendChild(badges(verdicts));
    const line = el("div", {"class": "ex-summary"});
    const reward = output("score-reward", "reward"), mine = output("score-adv", "advantage");
    const mean = output("score-mean", "group mean"), std = output("score-std", "std (Bessel)");
    const rank = el("span", {id: "score-rank"}, rankText(rewards, index));
    line.append(reward.span, mine.span, rank, mean.span, std.span);
    [[reward, rewards[index]], [mine, a], [mean, adv.mean], [std, adv.std]].forEach(([o, v]) => show(o.node, v));
    const said = adv.tied ? `All ${rewards.length} rewards tie: every advantage is 0, the group teaches nothing.` :
      a > 0 ? "Above the group mean: training would make answers like this one more likely." :
      a < 0 ? "Below the group mean: training would make answers like this one less likely." :
      "Exactly at the group mean: no push either way.";
    result.append(head, line, el("p", {id: "score-said", "class": "ex-why"}, said),
                  advantageBars("score-advantages", rewards, adv.advantages, index));
  }
  function answerForm(group, eps, result, error) {
    const box = el("div", {"class": "ex-answer"});
    const text = el("textarea", {id: "score-answer", rows: 4, placeholder: "your answer to the prompt above"});
    const button = el("button", {type: "button", id: "score-send"}, "score it with the run's verifiers");
    const rewards = group.completions.map((c) => c.reward);
    button.addEventListener("click", async () => {
      button.disabled = true;
      error.textContent = "";
      clear(result).dataset.state = "waiting";
      try {
        const answer = await sendAnswer(group.prompt_id, text.value);
        placeAnswer(result, {label: "your answer", verdicts: answer.verdicts, rewards: [...rewards, answer.reward],
                             index: rewards.length, eps});
        result.dataset.state = "done";
      } catch (err) {  // the server's refusal or a lost connection: said in the view, never thrown at the page
        error.textContent = err.message;
        result.dataset.state = "error";
      } finally {
        button.disabled = false;
      }
    });
    box.append(text, el("br"), button);
    return box;
  }
  function pickForm(group, why, eps, result) {
    const box = el("div", {"class": "ex-answer"});
    const note = el("p", {"class": "muted"}, "Typing your own answer is off here: ");
    note.append(el("span", {id: "score-why"}, why), ". Pick one of the run's own scored answers instead; it is " +
                "placed in its group the same way.");
    const pick = el("select", {id: "score-pick"});
    pick.appendChild(el("option", {value: ""}, "choose one of the group's answers"));
    group.completions.forEach((c, i) => pick.appendChild(el("option", {value: String(i)},
      `answer ${i + 1}: reward ${fmt(c.reward)} (${outcomes(c.verdicts)})`)));
    const text = el("pre", {id: "score-text", "class": "ex-text"});
    pick.addEventListener("change", () => {
      if (pick.value === "") { clear(result).dataset.state = "empty"; text.textContent = ""; return; }
      const i = parseInt(pick.value, 10), c = group.completions[i];
      text.textContent = c.text;
      placeAnswer(result, {label: `answer ${i + 1}`, verdicts: c.verdicts, index: i, eps,
                           rewards: group.completions.map((m) => m.reward)});
      result.dataset.state = "done";
    });
    box.append(note, pick, text);
    return box;
  }
  function buildScore(body, ctx, kept) {
    const group = usableGroup(body, ctx), settings = ctx.data.settings;
    body.dataset.promptId = group ? group.prompt_id : "";
    if (!group) return;
    const scoring = ctx.data.scoring || {enabled: false, why: ""};
    intro(body, "Write your own answer to one of the run's prompts: the run's own verifiers judge it, and it " +
                "joins the group as one more member. Notice that its advantage depends on the others: a right " +
                "answer among right answers earns little, a right answer among wrong ones a lot.");
    showQuestion(body, group, settings);
    const result = el("div", {id: "score-result", "class": "ex-result", "data-state": "empty"});
    const error = el("p", {id: "score-error", "class": "error", role: "alert"});
    if (scoring.enabled) {
      body.appendChild(answerForm(group, settings.std_epsilon, result, error));
      if (kept && kept.typed) body.querySelector("#score-answer").value = kept.typed;
    } else {
      body.appendChild(pickForm(group, scoring.why, settings.std_epsilon, result));
    }
    if (kept && kept.moved) body.appendChild(el("p", {"class": "muted"}, kept.moved));
    body.append(error, result);
  }
  /* The dashboard scores answers only to prompts its page shows; when the run moves on and this view's prompt
   * leaves the page, the view takes the newest one (keeping what was typed). */
  function refreshScore(body, ctx) {
    const held = body.dataset.promptId, part = ctx.data.group, now = part && part.group ? part.group.prompt_id : "";
    const onPage = new Set(ctx.payload.runs.flatMap((run) => run.groups.map((g) => g.prompt_id)));
    if (held === now || (held && onPage.has(held))) return;
    const typed = body.querySelector("#score-answer");
    const kept = {typed: typed ? typed.value : "", moved: held ? "The prompt answered before left the " +
                  "dashboard's latest steps: this is the newest one." : ""};
    clear(body);
    buildScore(body, ctx, kept);
  }
  V.addView({id: "score", order: 2, title: "Score your own answer", build: buildScore, refresh: refreshScore});

  // ---- 5. difficulty sweet spot ------------------------------------------------------------------------------
  const GRID = Array.from({length: 101}, (_, i) => i / 100);
  function difficultyChart(part, G, p, eps) {
    const tie = (x) => V.tieProbability(x, G), abs = (x) => V.expectedAbsAdvantage(x, G, eps);
    const prompts = (part.points || []).filter((pt) => typeof pt.pass_rate === "number");
    const dots = prompts.map((pt, i) => ({
      key: "prompt-" + i, x: pt.pass_rate, y: abs(pt.pass_rate), r: 5, cls: "prompt" + (tie(pt.pass_rate) > 0.5 ?
        " ties" : ""), label: `${pt.prompt} (pass rate ${fmt(pt.pass_rate)}${pt.step ? `, step ${pt.step}` : ""})`}));
    dots.push({key: "p-tie", x: p, y: tie(p), cls: "here", label: "P(tie) at p"},
              {key: "p-abs", x: p, y: abs(p), cls: "here", label: "E|A| at p"});
    return {prompts, tie, svg: V.plot({
      id: "difficulty", x: {min: 0, max: 1, label: "success rate p"}, y: {min: 0, max: 1, label: "P(tie), E|A|"},
      lines: [{key: "tie", cls: "tie", points: GRID.map((x) => [x, tie(x)]), label: "P(tie) = p^G + (1 - p)^G"},
              {key: "abs", cls: "abs", points: GRID.map((x) => [x, abs(x)]), label: "expected |A|"}],
      dots})};
  }
  function legend() {
    const box = el("div", {"class": "legend"});
    [["tie", "P(tie): the whole group right or wrong, no signal"], ["abs", "E|A|: signal per answer"],
     ["prompt", "this run's prompts at their pass rate (hollow: ties most of the time)"]].forEach(([cls, text]) => {
      const item = el("span", {}, text);
      item.prepend(el("span", {"class": "chip ex-chip-" + cls}));
      box.appendChild(item);
    });
    return box;
  }
  function buildDifficulty(body, ctx, kept) {
    body.dataset.key = difficultyKey(ctx);
    const part = ctx.data.difficulty, settings = ctx.data.settings;
    V.sourceNote(body, part);
    if (!part) return;
    const G0 = part.source === "run" ? settings.group_size : part.group_size || settings.group_size;
    const eps = settings.std_epsilon;
    intro(body, "A prompt the model solves with chance p gets a group of G answers. Slide p: near 0 or 1 the " +
                "whole group is usually wrong (or right), ties, and teaches nothing; near 1/2 the advantages are " +
                "largest. Slide G: larger groups tie less often, so hard and easy prompts still teach. The dots " +
                "are the prompts at their measured pass rates.");
    const g = V.slider({id: "difficulty-g", label: "group size G", min: 1, max: Math.max(16, G0), step: 1,
                        value: (kept && kept.g) || G0, format: String, onInput: draw});
    const p = V.slider({id: "difficulty-p", label: "success rate p", min: 0, max: 1, step: 0.01,
                        value: kept && kept.p !== undefined ? kept.p : 0.5, onInput: draw});
    const controls = el("div", {"class": "controls"});
    controls.append(g.node, el("span", {"class": "ex-mark", id: "difficulty-run-g"},
                               `${part.source === "run" ? "this run" : "the example"}: G = ${G0}`), p.node);
    const tie = output("difficulty-tie", "P(tie)"), abs = output("difficulty-abs", "expected |A|");
    const share = output("difficulty-share", "prompts whose groups tie most of the time (P(tie) > 1/2):");
    const line = el("div", {"class": "ex-summary"});
    line.append(tie.span, abs.span, share.span);
    const chart = el("div", {id: "difficulty-chart", "class": "ex-chart"});
    body.append(controls, line, chart, legend());
    function draw() {
      const G = g.value(), pv = p.value(), drawn = difficultyChart(part, G, pv, eps);
      show(tie.node, V.tieProbability(pv, G));
      show(abs.node, V.expectedAbsAdvantage(pv, G, eps));
      const n = drawn.prompts.length, ties = drawn.prompts.filter((pt) => drawn.tie(pt.pass_rate) > 0.5).length;
      share.node.setAttribute("data-value", n ? String(ties / n) : "");
      share.node.textContent = n ? `${ties} of ${n} (${Math.round((100 * ties) / n)}%)` : "no prompts to place";
      clear(chart).appendChild(drawn.svg);
    }
    draw();
  }
  const difficultyKey = (ctx) => {
    const part = ctx.data.difficulty;
    return part ? `${part.source}:${(part.points || []).length}` : "none";
  };
  V.addView({id: "difficulty", order: 5, title: "Difficulty sweet spot", build: buildDifficulty,
             refresh: refresher(buildDifficulty, difficultyKey, (body) => ({g: sliderValue(body, "difficulty-g"),
                                                                           p: sliderValue(body, "difficulty-p")}))});
})();
