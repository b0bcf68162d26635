// The upload form sends with fetch when it can, so a refused package keeps its place in the form:
// a browser cannot refill a file input, so a page reload would make the author pick the file again.
// The server answers as for a plain form post: 303 to the upload's report (followed here), or the
// form again with the error (#upload-error), which replaces this page's error box. Without
// JavaScript the form posts as usual and the server's page says to choose the file again.
(function () {
  "use strict";
  var form = document.getElementById("upload-form");
  if (!form || !window.fetch || !window.FormData || !window.DOMParser) { return; }
  var button = form.querySelector("button[type=submit]");
  var busy = document.getElementById("upload-busy");

  function showError(box) {
    var old = document.getElementById("upload-error");
    if (old) { old.replaceWith(box); } else { form.parentNode.insertBefore(box, form); }
    box.setAttribute("tabindex", "-1");
    box.focus();
  }

  function plainError(message) {
    var box = document.createElement("pre");
    box.className = "error upload-error";
    box.id = "upload-error";
    box.setAttribute("role", "alert");
    box.textContent = message;
    showError(box);
  }

  form.addEventListener("submit", function (event) {
    event.preventDefault();
    button.disabled = true;
    busy.textContent = "Uploading…";
    fetch(form.action, { method: "POST", body: new FormData(form), credentials: "same-origin" })
      .then(function (response) {
        if (response.redirected && response.ok) {
          window.location.assign(response.url);
          return null;
        }
        return response.text().then(function (html) {
          var page = new DOMParser().parseFromString(html, "text/html");
          var box = page.getElementById("upload-error");
          if (box) {
            showError(document.importNode(box, true));
          } else {
            var main = page.querySelector("main");
            plainError("The server refused the upload (" + response.status + ")" +
              (main ? ": " + main.textContent.trim().replace(/\s+/g, " ").slice(0, 300) : ""));
          }
        });
      })
      .catch(function () {
        plainError("The upload did not reach the server; the file is still chosen: try again.");
      })
      .then(function () {
        button.disabled = false;
        busy.textContent = "";
      });
  });
})();
