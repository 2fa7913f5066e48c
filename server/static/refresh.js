// Follows a plan's run on its page: polls the run's progress while it is
// running (or about to: the server has started it) and reloads the page
// when the run ends. Without JavaScript a
// <noscript> refresh does the same, more bluntly.
(function () {
  "use strict";
  var el = document.getElementById("progress");
  if (!el || el.getAttribute("data-running") !== "true") {
    return;
  }
  var src = el.getAttribute("data-src");
  var bar = el.querySelector("progress");
  var count = el.querySelector(".count");
  function tick() {
    fetch(src, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (r) {
        if (!r.ok) {
          throw new Error(r.status);
        }
        return r.json();
      })
      .then(function (p) {
        if (bar) {
          bar.max = p.partitions;
          bar.value = p.published;
        }
        if (count) {
          count.textContent = p.published + " of " + p.partitions + " partitions published";
        }
        if (!p.running) {
          window.location.reload();
          return;
        }
        window.setTimeout(tick, 2000);
      })
      .catch(function () {
        window.setTimeout(tick, 10000);
      });
  }
  window.setTimeout(tick, 2000);
})();
