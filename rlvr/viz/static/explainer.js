/* rlvr report / dashboard: the explainer, ports of rlvr.advantages.grpo_advantages, rlvr.objectives.ppo_clip and
 * rlvr.loss.kl_k3 on numbers the reader types. No dependencies. Inlined before page.js, which calls
 * rlvrViz.initExplainer; its own file so that page.js stays readable (under 400 lines). */
(() => {
  "use strict";
  function el(tag, attrs, text) {
    const node = document.createElement(tag);
    Object.entries(attrs || {}).forEach(([k, v]) => node.setAttribute(k, v));
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }
  const byId = (id) => document.getElementById(id);
  const clear = (node) => { node.replaceChildren(); return node; };
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
  window.rlvrViz = {grpoAdvantages, ppoClip, klK3, initExplainer};
})();
