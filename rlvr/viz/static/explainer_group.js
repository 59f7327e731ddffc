/* rlvr report / dashboard: explainer views 1 (group sampling), 2 (score your own answer), 5 (difficulty sweet spot). */
(() => {
  "use strict";
})();
