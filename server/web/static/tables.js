// Tables that scroll sideways say so. Each .table-scroll box gets a "scroll →" line above it, shown
// while its table is wider than the box and there is more of it to the right; the box has the
// class "overflows" while the table is wider (style.css also draws an edge shadow, without this).
(function () {
  "use strict";
  function watch(box) {
    var hint = document.createElement("p");
    hint.className = "scroll-hint";
    hint.setAttribute("aria-hidden", "true");  // the box itself is a labelled, focusable region
    hint.textContent = "more columns: scroll →";
    hint.hidden = true;
    box.parentNode.insertBefore(hint, box);
    function update() {
      var more = box.scrollWidth - box.clientWidth;
      box.classList.toggle("overflows", more > 1);
      hint.hidden = !(more > 1 && box.scrollLeft < more - 1);
    }
    box.addEventListener("scroll", update, { passive: true });
    if (window.ResizeObserver) {
      new ResizeObserver(update).observe(box);
    } else {
      window.addEventListener("resize", update);
    }
    update();
  }
  function start() {
    Array.prototype.forEach.call(document.querySelectorAll(".table-scroll"), watch);
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
