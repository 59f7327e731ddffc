/* rlvr report / dashboard: explainer views 3 (temperature), 4 (reward hacking), 9 (KL and beta), 11 (outcome vs process), 12 (tune it yourself). */
(() => {
  "use strict";
})();
