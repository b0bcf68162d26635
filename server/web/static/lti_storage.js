// LTI Client Side postMessage Storage (1EdTech), the tool's side: the login page puts the
// login's binding value into the platform's storage frame, the launch page reads it back.
// Everything it needs is on #lti-storage: data-mode ("put" or "get"), data-target (the
// platform's lti_storage_target: "_parent" or the name of a frame of the parent), data-origin
// (the platform's OIDC authorization origin: the only origin written to and answers are read
// from), data-key, data-value (put) and data-next (put: where to go once stored).
// See server/lti/routes.py and docs/ARCHITECTURE.md ("Launches without cookies").
(function () {
  "use strict";
  var el = document.getElementById("lti-storage");
  if (!el) { return; }
  var mode = el.getAttribute("data-mode");
  var target = el.getAttribute("data-target");
  var origin = el.getAttribute("data-origin");
  var key = el.getAttribute("data-key");
  var messageId = "remat-" + Date.now().toString(36) + "-" + Math.random().toString(36).slice(2);
  var finished = false;

  function frame() {
    try {
      var parent = window.parent !== window ? window.parent : window.opener;
      if (!parent) { return null; }
      return target === "_parent" ? parent : parent.frames[target] || null;
    } catch (e) {
      return null;
    }
  }

  function finish(value) {
    if (finished) { return; }
    finished = true;
    if (mode === "put") {
      window.location.replace(el.getAttribute("data-next"));
    } else {
      var form = document.getElementById("storage-launch");
      form.elements.binding.value = typeof value === "string" ? value : "";
      form.submit();
    }
  }

  window.addEventListener("message", function (event) {
    var data = event.data;
    if (event.origin !== origin || !data || typeof data !== "object" || data.message_id !== messageId) { return; }
    if (data.subject !== "lti." + mode + "_data.response") { return; }
    finish(data.error ? null : data.value);
  });

  var to = frame();
  if (!to) { finish(null); return; }
  var message = {subject: "lti." + mode + "_data", message_id: messageId, key: key};
  if (mode === "put") { message.value = el.getAttribute("data-value"); }
  try {
    to.postMessage(message, origin);
  } catch (e) {
    finish(null);
    return;
  }
  // A platform that names a storage target answers; the wait only ends a launch whose platform
  // never does. 4 s was too short on a loaded machine: a late answer lost a genuine binding and
  // the launch was refused (seen once in CI, Chromium beside two grading workers).
  window.setTimeout(function () { finish(null); }, 15000);
})();
