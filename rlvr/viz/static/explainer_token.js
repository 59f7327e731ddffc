/* rlvr report / dashboard: explainer views 7 (token by token), 8 (policy ratio explorer), 10 (credit assignment), 13 (one token's loss). */
(() => {
  "use strict";
})();
