/* rlvr report / dashboard, explainer view 6: build your own group. Rewards (sliders) -> advantages as a live bar
 * chart, and one token's clipped loss and KL term for each completion (the table), with the ports of
 * grpo_advantages, ppo_clip and the KL estimators in explainer.js. Its inputs open at the run's own clip range,
 * beta, std eps and KL estimator. */
(() => {
  "use strict";
  const V = window.rlvrViz, {el, byId, clear, show} = V;
  const exNumber = (id) => parseFloat(byId(id).value);
  const exRewards = () => [...document.querySelectorAll("#ex-rewards input.ex-reward-value")].map(
    (i) => parseFloat(i.value));
  function rewardRows(values) {
    const box = clear(byId("ex-rewards"));
    values.forEach((v, i) => {
      // a slider for the feel, a number box for an exact value (rewards need not lie in [0, 1])
      const range = el("input", {id: "ex-r-slider-" + i, type: "range", min: "0", max: "1", step: "any", value: v});
      const input = el("input", {id: "ex-r-" + i, type: "number", step: "0.1", value: v, "class": "ex-reward-value"});
      range.addEventListener("input", () => { input.value = range.value; compute(); });
      input.addEventListener("input", () => { range.value = input.value; compute(); });
      const remove = el("button", {type: "button", id: "ex-remove-" + i, title: "remove this completion"}, "remove");
      remove.addEventListener("click", () => { const r = exRewards(); r.splice(i, 1); rewardRows(r); });
      remove.disabled = values.length <= 1;
      const row = el("div", {"class": "ex-reward"});
      row.append(el("label", {"for": "ex-r-" + i}, "r" + (i + 1)), range, input, remove);
      box.appendChild(row);
    });
    byId("ex-g").textContent = String(values.length);
    compute();
  }
  function compute() {
    const rewards = exRewards(), low = exNumber("ex-eps-low"), high = exNumber("ex-eps-high");
    const rho = exNumber("ex-ratio"), beta = exNumber("ex-beta"), eps = exNumber("ex-std-eps");
    const pi = exNumber("ex-pi"), piRef = exNumber("ex-pi-ref");
    const estimator = byId("ex-kl-est").value, logPi = Math.log(pi), logRef = Math.log(piRef);
    document.querySelectorAll(".ex-kl-name").forEach((node) => { node.textContent = estimator; });
    const bad = [...rewards, low, high, rho, beta, eps].some((v) => !isFinite(v)) || !(pi > 0 && pi <= 1) ||
                !(piRef > 0 && piRef <= 1) || rho < 0 || beta < 0 || eps <= 0 || low < 0 || high < 0;
    byId("ex-error").textContent = bad ? "Every field needs a number: rho, beta, eps_low, eps_high >= 0, " +
                                         "std eps > 0, 0 < pi <= 1, 0 < pi_ref <= 1." : "";
    const rows = clear(byId("ex-rows")), chart = clear(byId("ex-chart"));
    if (bad) return;
    const adv = V.grpoAdvantages(rewards, eps), kl = {d: logRef - logPi, value: V.KL[estimator](logPi, logRef)};
    [["ex-mean", adv.mean], ["ex-std", adv.std], ["ex-tied", adv.tied ? "yes" : "no"], ["ex-log-ratio", kl.d],
     ["ex-kl", kl.value], ["ex-kl-term", beta * kl.value]].forEach(([id, v]) => show(id, v));
    chart.appendChild(V.bars({id: "build-advantages", values: adv.advantages, min: -2, max: 2,
                              labels: rewards.map((r, i) => `completion ${i + 1}, reward ${V.fmt(r)}`),
                              xlabel: "completion", ylabel: "advantage A"}));
    adv.advantages.forEach((a, i) => {
      const s = V.ppoClip(rho, a, low, high), tr = el("tr");
      tr.appendChild(el("td", {}, i + 1));
      [["reward", rewards[i]], ["adv", a], ["unclipped", s.unclipped], ["clipped-term", s.clippedTerm],
       ["loss", s.loss], ["binds", s.binds ? "yes" : "no"], ["total", s.loss + beta * kl.value]].forEach(([key, v]) => {
        tr.appendChild(show(el("td", {id: `ex-${key}-${i}`}), v));
      });
      rows.appendChild(tr);
    });
  }
  function build(body, ctx) {
    const template = byId("ex-build-template");
    body.appendChild(template.content.cloneNode(true));
    const d = ctx.data;
    [["ex-eps-low", "eps_low"], ["ex-eps-high", "eps_high"], ["ex-ratio", "ratio"], ["ex-std-eps", "std_eps"],
     ["ex-beta", "beta"], ["ex-pi", "pi"], ["ex-pi-ref", "pi_ref"]].forEach(([id, key]) => {
      byId(id).value = d[key];
      byId(id).addEventListener("input", compute);
    });
    const estimator = byId("ex-kl-est");  // the run's estimator (k3 when the config names none the page knows)
    estimator.value = Object.hasOwn(V.KL, d.kl_estimator) ? d.kl_estimator : "k3";
    if (d.kl_placement === "reward") {  // the trainer subtracts beta * k from the reward, not in the loss
      byId("ex-error").before(el("p", {"class": "muted", id: "ex-kl-placement"}, "This run charges the KL in the " +
        "reward (algorithm.kl_placement=reward): its loss holds no KL term; the table's last column is what a " +
        "KL in the loss would add."));
    }
    estimator.addEventListener("change", compute);
    byId("ex-add").addEventListener("click", () => rewardRows([...exRewards(), 0]));
    rewardRows(d.rewards);
  }
  V.addView({id: "build", order: 6, title: "Build your own group", build,
             // the run's own, once its config exists
             parts: ["eps_low", "eps_high", "beta", "std_eps", "kl_estimator", "kl_placement"]});
})();
