// remat-judge front-end: progressive enhancement only. Every page works without this file;
// when it loads it
//   a. replaces textarea#source[data-editor] with a CodeMirror 6 editor (kept in sync),
//   b. keeps a localStorage draft of the code (textarea[data-draft-key]),
//   c. submits form#submit-form with fetch and shows the live status and the verdict panel,
//   d. renders .math.inline / .math.block elements with KaTeX.
// DOM contract (all optional; each feature is skipped when its elements are absent):
//   textarea#source[data-editor][data-draft-key]  #draft-note[hidden] > #reset-starter
//   form#submit-form[action] (csrf_token input, submit button)  #live-status  #verdict-panel
import { EditorState } from "@codemirror/state";
import {
  EditorView,
  drawSelection,
  highlightActiveLine,
  highlightActiveLineGutter,
  highlightSpecialChars,
  keymap,
  lineNumbers,
} from "@codemirror/view";
import { defaultKeymap, history, historyKeymap, indentWithTab } from "@codemirror/commands";
import {
  bracketMatching,
  defaultHighlightStyle,
  indentOnInput,
  indentUnit,
  syntaxHighlighting,
} from "@codemirror/language";
import { python } from "@codemirror/lang-python";
import katex from "katex";

const POLL_INTERVAL_MS = 700;
const POLL_TIMEOUT_MS = 5 * 60 * 1000;
const MAX_POLL_NETWORK_FAILURES = 5;
const DRAFT_SAVE_DELAY_MS = 300;

const STATUS_TEXT = {
  submitting: "Submitting…",
  queued: "Queued…",
  running: "Running in the sandbox…",
};

// ---------------------------------------------------------------------------------------------
// localStorage that never throws (private mode, disabled storage, quota).
const storage = {
  get(key) {
    try {
      return window.localStorage.getItem(key);
    } catch (_) {
      return null;
    }
  },
  set(key, value) {
    try {
      window.localStorage.setItem(key, value);
    } catch (_) {
      /* storage unavailable or full: drafts are best effort */
    }
  },
  remove(key) {
    try {
      window.localStorage.removeItem(key);
    } catch (_) {
      /* ignore */
    }
  },
};

// ---------------------------------------------------------------------------------------------
// a + b. Editor and draft.

const editorTheme = EditorView.theme(
  {
    "&": {
      backgroundColor: "#ffffff",
      color: "#1f2328",
      border: "1px solid #c9d1d9",
      borderRadius: "6px",
      fontSize: "14px",
      maxWidth: "100%",
    },
    "&.cm-focused": {
      outline: "2px solid #0969da",
      outlineOffset: "-1px",
    },
    ".cm-scroller": {
      fontFamily:
        'ui-monospace, SFMono-Regular, "SF Mono", Menlo, Consolas, "Liberation Mono", "DejaVu Sans Mono", monospace',
      lineHeight: "1.5",
    },
    ".cm-content": {
      padding: "6px 0",
      caretColor: "#1f2328",
    },
    // About 18 lines tall when empty; grows with the code.
    ".cm-content, .cm-gutter": {
      minHeight: "calc(18 * 1.5em)",
    },
    ".cm-cursor, .cm-dropCursor": {
      borderLeftColor: "#1f2328",
      borderLeftWidth: "2px",
    },
    ".cm-gutters": {
      backgroundColor: "#f6f8fa",
      color: "#57606a", // 4.5:1 on the gutter (axe-core color-contrast)
      borderRight: "1px solid #d8dee4",
      borderTopLeftRadius: "6px",
      borderBottomLeftRadius: "6px",
    },
    ".cm-lineNumbers .cm-gutterElement": {
      padding: "0 8px 0 10px",
    },
    ".cm-activeLine": {
      backgroundColor: "rgba(234, 238, 242, 0.5)",
    },
    ".cm-activeLineGutter": {
      backgroundColor: "#eaeef2",
      color: "#1f2328",
    },
    "&.cm-focused .cm-selectionBackground, .cm-selectionBackground, .cm-content ::selection": {
      backgroundColor: "#b6d7ff",
    },
    "&.cm-focused .cm-matchingBracket": {
      backgroundColor: "#d2f0d8",
      outline: "1px solid #4ac26b",
    },
    "&.cm-focused .cm-nonmatchingBracket": {
      backgroundColor: "#ffe1e1",
      outline: "1px solid #d1242f",
    },
    // 16px on small screens, so that iOS does not zoom in when the editor gets focus.
    // (Inside an @-block only plain selectors work: style-mod mangles "&" there.)
    "@media (max-width: 640px)": {
      ".cm-scroller": { fontSize: "16px" },
    },
  },
  { dark: false },
);

function labelText(textarea) {
  const aria = textarea.getAttribute("aria-label");
  if (aria) return aria;
  const labels = textarea.labels ? Array.from(textarea.labels) : [];
  const text = labels.map((l) => l.textContent.trim()).filter(Boolean).join(" ");
  return text || "Source code";
}

function submitForm(form) {
  if (!form) return false;
  if (typeof form.requestSubmit === "function") {
    form.requestSubmit();
  } else {
    const button = findSubmitButton(form);
    if (button) button.click();
  }
  return true;
}

function setupEditor(textarea) {
  const starter = textarea.defaultValue; // the server-rendered text
  const draftKey = textarea.getAttribute("data-draft-key") || "";
  const draftNote = document.getElementById("draft-note");
  const resetButton = document.getElementById("reset-starter");
  const form = textarea.form;

  let initial = textarea.value;
  let draftLoaded = false;
  if (draftKey) {
    const draft = storage.get(draftKey);
    if (draft !== null && draft !== starter) {
      initial = draft;
      draftLoaded = true;
    }
  }

  let view = null;
  let saveTimer = null;
  const saveDraftNow = () => {
    if (saveTimer !== null) {
      clearTimeout(saveTimer);
      saveTimer = null;
    }
    if (!draftKey || !view) return;
    const text = view.state.doc.toString();
    if (text === starter) storage.remove(draftKey);
    else storage.set(draftKey, text);
  };
  const scheduleDraftSave = () => {
    if (!draftKey) return;
    if (saveTimer !== null) clearTimeout(saveTimer);
    saveTimer = setTimeout(saveDraftNow, DRAFT_SAVE_DELAY_MS);
  };

  const state = EditorState.create({
    doc: initial,
    extensions: [
      lineNumbers(),
      highlightActiveLineGutter(),
      highlightSpecialChars(),
      history(),
      drawSelection(),
      indentOnInput(),
      bracketMatching(),
      syntaxHighlighting(defaultHighlightStyle, { fallback: true }),
      highlightActiveLine(),
      python(),
      indentUnit.of("    "),
      EditorState.tabSize.of(4),
      keymap.of([
        { key: "Mod-Enter", run: () => submitForm(form), preventDefault: true },
        ...defaultKeymap,
        ...historyKeymap,
        indentWithTab,
      ]),
      editorTheme,
      EditorView.lineWrapping,
      EditorView.contentAttributes.of({ "aria-label": labelText(textarea) }),
      EditorView.updateListener.of((update) => {
        if (!update.docChanged) return;
        if (draftNote && !draftNote.hidden) draftNote.hidden = true; // the note has been read: editing goes on
        textarea.value = update.state.doc.toString();
        scheduleDraftSave();
      }),
    ],
  });

  view = new EditorView({ state });
  textarea.value = initial;
  textarea.after(view.dom);
  // Hide the textarea (inline style wins over any author `textarea { display: ... }` rule).
  textarea.hidden = true;
  textarea.style.display = "none";
  // A hidden `required` control blocks native validation ("not focusable"): check it ourselves.
  if (textarea.required) {
    textarea.required = false;
    textarea.setAttribute("data-required", "");
  }
  if (textarea.labels) {
    for (const label of Array.from(textarea.labels)) {
      label.addEventListener("click", (ev) => {
        ev.preventDefault();
        view.focus();
      });
    }
  }

  if (draftLoaded && draftNote) draftNote.hidden = false;

  if (resetButton) {
    resetButton.addEventListener("click", (ev) => {
      ev.preventDefault();
      // One undoable transaction, so Ctrl-Z brings the draft back.
      view.dispatch({
        changes: { from: 0, to: view.state.doc.length, insert: starter },
        selection: { anchor: 0 },
        scrollIntoView: true,
      });
      textarea.value = starter;
      if (saveTimer !== null) {
        clearTimeout(saveTimer);
        saveTimer = null;
      }
      if (draftKey) storage.remove(draftKey);
      if (draftNote) draftNote.hidden = true;
      view.focus();
    });
  }

  // Never lose the last keystrokes to the debounce when the page goes away.
  const flush = () => {
    if (saveTimer !== null) saveDraftNow();
  };
  window.addEventListener("pagehide", flush);
  document.addEventListener("visibilitychange", () => {
    if (document.visibilityState === "hidden") flush();
  });

  window.rematEditor = view;
  return view;
}

// ---------------------------------------------------------------------------------------------
// c. Submission with live status.

function findSubmitButton(form) {
  return form.querySelector('button[type="submit"], input[type="submit"], button:not([type])');
}

function describeError(payload, response) {
  if (payload && payload.detail !== undefined && payload.detail !== null) {
    const detail = payload.detail;
    if (typeof detail === "string") return detail;
    if (Array.isArray(detail)) {
      // FastAPI validation errors: [{loc, msg, type}, ...]
      const msgs = detail
        .map((d) => (d && typeof d === "object" ? d.msg || JSON.stringify(d) : String(d)))
        .filter(Boolean);
      if (msgs.length) return msgs.join("; ");
    }
    return JSON.stringify(detail);
  }
  const statusText = response.statusText ? " " + response.statusText : "";
  return "Submission failed (HTTP " + response.status + statusText + ").";
}

async function readJson(response) {
  const type = response.headers.get("Content-Type") || "";
  if (!/\bjson\b/i.test(type)) return null;
  try {
    return await response.json();
  } catch (_) {
    return null;
  }
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function setupSubmit(form) {
  const liveStatus = document.getElementById("live-status");
  const panel = document.getElementById("verdict-panel");
  const textarea = form.querySelector("textarea#source");
  let pending = false;

  if (liveStatus && !liveStatus.hasAttribute("aria-live") && !liveStatus.hasAttribute("role")) {
    liveStatus.setAttribute("role", "status");
    liveStatus.setAttribute("aria-live", "polite");
  }

  const show = (status, text, isError) => {
    if (!liveStatus) return;
    liveStatus.textContent = text;
    liveStatus.setAttribute("data-status", status);
    liveStatus.removeAttribute("data-verdict");
    liveStatus.classList.toggle("error", !!isError);
    liveStatus.hidden = false;
  };
  const showError = (text) => show("error", text, true);

  const syncTextarea = () => {
    const view = window.rematEditor;
    if (textarea && view && view.state) textarea.value = view.state.doc.toString();
  };

  async function poll(statusUrl, panelUrl) {
    const deadline = Date.now() + POLL_TIMEOUT_MS;
    let networkFailures = 0;
    let lastStatus = "";
    for (;;) {
      if (Date.now() > deadline) {
        showError(
          "Still not finished after 5 minutes; stopped waiting. Reload the page later to see the verdict.",
        );
        return;
      }
      let response;
      try {
        response = await fetch(statusUrl, {
          method: "GET",
          headers: { Accept: "application/json" },
          credentials: "same-origin",
          cache: "no-store",
        });
      } catch (err) {
        networkFailures += 1;
        if (networkFailures >= MAX_POLL_NETWORK_FAILURES) {
          showError("Lost contact with the server (" + err.message + "). Reload the page to see the verdict.");
          return;
        }
        await sleep(POLL_INTERVAL_MS * (networkFailures + 1));
        continue;
      }
      networkFailures = 0;
      const payload = await readJson(response);
      if (!response.ok || !payload) {
        showError(
          payload ? describeError(payload, response) : "Status check failed (HTTP " + response.status + ").",
        );
        return;
      }
      const status = String(payload.status || "");
      if (status === "done" || status === "failed") {
        await finish(payload.verdict, panelUrl);
        return;
      }
      if (status !== lastStatus) {
        show(status, STATUS_TEXT[status] || "Status: " + status + "…", false);
        lastStatus = status;
      }
      await sleep(POLL_INTERVAL_MS);
    }
  }

  async function finish(verdict, panelUrl) {
    const verdictText = verdict === null || verdict === undefined ? "" : String(verdict);
    let panelError = null;
    if (panel && panelUrl) {
      try {
        const response = await fetch(panelUrl, {
          method: "GET",
          headers: { Accept: "text/html" },
          credentials: "same-origin",
          cache: "no-store",
        });
        if (!response.ok) throw new Error("HTTP " + response.status);
        // Trusted, server-rendered HTML fragment.
        panel.innerHTML = await response.text();
        panel.hidden = false;
        renderMath(panel);
      } catch (err) {
        panelError = err;
      }
    }
    if (liveStatus) {
      liveStatus.textContent =
        (verdictText || "Done") +
        (panelError ? " (the details could not be loaded: " + panelError.message + "; reload the page)" : "");
      liveStatus.setAttribute("data-status", "done");
      if (verdictText) liveStatus.setAttribute("data-verdict", verdictText);
      else liveStatus.removeAttribute("data-verdict");
      liveStatus.classList.toggle("error", !!panelError);
    }
    if (panel && !panelError) {
      const reduce =
        window.matchMedia && window.matchMedia("(prefers-reduced-motion: reduce)").matches;
      panel.scrollIntoView({ behavior: reduce ? "auto" : "smooth", block: "start" });
    }
  }

  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    if (pending) return;
    syncTextarea();
    if (textarea && textarea.hasAttribute("data-required") && !textarea.value.trim()) {
      showError("The source code is empty.");
      return;
    }
    const button = ev.submitter || findSubmitButton(form);
    pending = true;
    if (button) button.disabled = true;
    form.setAttribute("aria-busy", "true");
    try {
      show("submitting", STATUS_TEXT.submitting, false);
      const action = new URL(form.getAttribute("action") || "", document.baseURI).href;
      let response;
      try {
        response = await fetch(action, {
          method: "POST",
          body: new FormData(form),
          headers: { Accept: "application/json" },
          credentials: "same-origin",
        });
      } catch (err) {
        showError("Could not reach the server: " + err.message);
        return;
      }
      const payload = await readJson(response);
      if (!response.ok) {
        showError(describeError(payload, response));
        return;
      }
      if (!payload || !payload.status_url) {
        if (response.redirected) {
          // The server answered with a page instead of JSON: follow it like a plain form post.
          window.location.assign(response.url);
          return;
        }
        showError("Unexpected answer from the server (HTTP " + response.status + ").");
        return;
      }
      const statusUrl = new URL(payload.status_url, response.url || document.baseURI).href;
      const panelUrl = payload.panel_url
        ? new URL(payload.panel_url, response.url || document.baseURI).href
        : "";
      // The previous verdict belongs to an older submission now.
      if (panel) panel.innerHTML = "";
      const first = String(payload.status || "queued");
      show(first, STATUS_TEXT[first] || "Status: " + first + "…", false);
      if (first === "done" || first === "failed") await finish(payload.verdict, panelUrl);
      else await poll(statusUrl, panelUrl);
    } catch (err) {
      showError("Something went wrong: " + (err && err.message ? err.message : String(err)));
    } finally {
      pending = false;
      if (button) button.disabled = false;
      form.removeAttribute("aria-busy");
    }
  });
}

// ---------------------------------------------------------------------------------------------
// d. Math.

function stripDelimiters(tex, display) {
  const t = tex.trim();
  const pairs = display
    ? [
        ["$$", "$$"],
        ["\\[", "\\]"],
      ]
    : [
        ["$", "$"],
        ["\\(", "\\)"],
      ];
  for (const [open, close] of pairs) {
    if (t.length >= open.length + close.length && t.startsWith(open) && t.endsWith(close)) {
      return t.slice(open.length, t.length - close.length);
    }
  }
  return t;
}

function renderMath(root) {
  const nodes = root.querySelectorAll(".math.inline, .math.block");
  for (const el of Array.from(nodes)) {
    if (el.hasAttribute("data-katex")) continue;
    const display = el.classList.contains("block");
    // mdit-py-plugins' dollarmath puts a permalink <a class="mathlabel"> inside labelled
    // equations ($$...$$ (label)): keep it out of the TeX and put it back afterwards.
    const label = el.querySelector(":scope > a.mathlabel");
    let source = el.textContent || "";
    if (label) {
      const copy = el.cloneNode(true);
      copy.querySelector(":scope > a.mathlabel").remove();
      source = copy.textContent || "";
    }
    const tex = stripDelimiters(source, display);
    try {
      katex.render(tex, el, { throwOnError: false, displayMode: display });
      if (label) el.insertBefore(label, el.firstChild);
      el.setAttribute("data-katex", "");
    } catch (err) {
      // Leave the raw TeX visible.
      if (window.console) console.warn("KaTeX failed on", tex, err);
    }
  }
}

// ---------------------------------------------------------------------------------------------

// ---------------------------------------------------------------------------------------------
// e. A page that stays fresh: relative times, loading a past submission, history after a verdict.

const RELATIVE = typeof Intl !== "undefined" && Intl.RelativeTimeFormat
  ? new Intl.RelativeTimeFormat(undefined, { numeric: "auto" }) : null;

function relativeTimes(root) {
  // "5 minutes ago", with the exact local time on hover (the server renders UTC without JS).
  for (const el of root.querySelectorAll("time[data-relative]")) {
    const when = new Date(el.getAttribute("datetime"));
    if (isNaN(when.getTime())) continue;
    const seconds = (when.getTime() - Date.now()) / 1000;
    const units = [["year", 31536000], ["month", 2592000], ["week", 604800], ["day", 86400],
                   ["hour", 3600], ["minute", 60], ["second", 1]];
    const [unit, size] = units.find(([, size]) => Math.abs(seconds) >= size) || ["second", 1];
    if (RELATIVE) el.textContent = RELATIVE.format(Math.round(seconds / size), unit);
    el.title = when.toLocaleString();
  }
}

function setupLoadButtons(root) {
  for (const link of root.querySelectorAll("a[data-load-source]")) {
    link.addEventListener("click", async (ev) => {
      const view = window.rematEditor;
      if (!view) return; // no editor: the link opens the source as text
      ev.preventDefault();
      try {
        const response = await fetch(link.href, { credentials: "same-origin", cache: "no-store" });
        if (!response.ok) throw new Error("HTTP " + response.status);
        const text = await response.text();
        // one undoable transaction: Ctrl-Z brings back what was in the editor
        view.dispatch({ changes: { from: 0, to: view.state.doc.length, insert: text }, selection: { anchor: 0 },
                        scrollIntoView: true });
        view.focus();
      } catch (err) {
        window.location.href = link.href;
      }
    });
  }
}

async function refreshFromPage() {
  // After a verdict: the history, the solved mark and the hints as the server sees them now.
  try {
    const response = await fetch(window.location.pathname, { credentials: "same-origin", cache: "no-store",
                                                              headers: { Accept: "text/html" } });
    if (!response.ok) return;
    const fresh = new DOMParser().parseFromString(await response.text(), "text/html");
    for (const selector of ["#history", ".problem-meta", "#hints"]) {
      const mine = document.querySelector(selector);
      const theirs = fresh.querySelector(selector);
      if (mine && theirs) mine.innerHTML = theirs.innerHTML; // trusted, server-rendered HTML
    }
    relativeTimes(document);
    setupLoadButtons(document.querySelector("#history") || document);
    renderMath(document.querySelector("#hints") || document);
  } catch (err) {
    if (window.console) console.error(err);
  }
}

function watchVerdicts() {
  const status = document.getElementById("live-status");
  if (!status || typeof MutationObserver === "undefined") return;
  new MutationObserver(() => {
    if (status.getAttribute("data-status") === "done") refreshFromPage();
  }).observe(status, { attributes: true, attributeFilter: ["data-status"] });
}

function init() {
  try {
    renderMath(document);
  } catch (err) {
    if (window.console) console.error(err);
  }
  relativeTimes(document);
  setupLoadButtons(document);
  watchVerdicts();
  const textarea = document.querySelector("textarea#source[data-editor]");
  if (textarea) {
    try {
      setupEditor(textarea);
    } catch (err) {
      // The plain textarea still works.
      if (window.console) console.error(err);
    }
  }
  const form = document.getElementById("submit-form");
  if (form && form.tagName === "FORM") setupSubmit(form);
}

if (document.readyState === "loading") {
  document.addEventListener("DOMContentLoaded", init);
} else {
  init();
}
