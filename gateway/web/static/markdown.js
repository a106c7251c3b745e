// The model's answers as Markdown. marked renders them (GFM: tables, fenced code, task lists) and
// DOMPurify keeps only inert HTML before anything reaches the page; code blocks get a copy button.
// Both libraries are vendored in static/vendor/ (README's dependency section) and loaded by
// index.html as plain deferred scripts, so they are there before this module runs.

import { el } from "./dom.js";

const { Marked } = globalThis.marked;

const escapeHtml = (text) => String(text).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

// HTML written in an answer is shown as text, except plain formatting tags without attributes
// (`a<br>b` in a table cell, <kbd>, <sub>, <details>). Anything else never reaches a parser of
// this page, so the CSP has nothing to refuse either; DOMPurify below stays the safety net.
const PLAIN_TAGS = /^(br|hr|p|b|i|u|s|em|strong|small|mark|del|ins|sub|sup|kbd|details|summary)$/i;
const plainHtml = (html) => [...html.matchAll(/<[^>]*>?/g)].every(([tag]) => {
  const name = /^<\/?([a-z][a-z0-9]*)\s*\/?>$/i.exec(tag);
  return name !== null && PLAIN_TAGS.test(name[1]);
});

const markdown = new Marked({
  gfm: true,
  breaks: true, // a single newline is a line break, as models (and the page before) mean it
  renderer: {
    html({ text, block }) {
      if (plainHtml(text)) return text;
      return block ? `<p>${escapeHtml(text.trim()).replace(/\n/g, "<br>")}</p>` : escapeHtml(text);
    },
    // The page's CSP loads images only from the gateway itself: a Markdown image is a link instead.
    image({ href, text }) {
      return `<a href="${escapeHtml(href)}">${escapeHtml(text || href)}</a>`;
    },
    // Task list boxes as marks, not form controls (no input of any kind comes from an answer).
    checkbox({ checked }) {
      return checked ? "☑ " : "☐ ";
    },
  },
});

// One sanitizer instance of our own, so its hooks touch nothing else.
const purify = globalThis.DOMPurify(window);
const SANITIZE = {
  USE_PROFILES: { html: true }, // no SVG or MathML
  FORBID_TAGS: ["img", "style", "form", "input", "button", "textarea", "select", "option", "dialog", "video", "audio"],
  // ids and names could shadow the page's own elements; style is blocked by the CSP anyway
  FORBID_ATTR: ["id", "name", "style"],
  RETURN_DOM_FRAGMENT: true,
};
purify.addHook("uponSanitizeAttribute", (node, data) => {
  // marked's `language-*` on code is the only class kept: an answer cannot dress itself as page UI
  if (data.attrName === "class" && !/^language-[\w+#.-]+$/.test(data.attrValue)) data.keepAttr = false;
});
purify.addHook("afterSanitizeAttributes", (node) => {
  if (node.tagName === "A" && node.hasAttribute("href")) {
    node.setAttribute("target", "_blank");
    node.setAttribute("rel", "noopener noreferrer");
  }
});

async function copyText(text) {
  if (navigator.clipboard && window.isSecureContext) return navigator.clipboard.writeText(text);
  // http on a LAN address is not a secure context: fall back to a selection and the copy command
  const area = el("textarea", { class: "copy-buffer", readonly: true, "aria-hidden": "true" });
  area.value = text;
  document.body.append(area);
  area.select();
  const ok = document.execCommand("copy");
  area.remove();
  if (!ok) throw new Error("the browser refused to copy; select the code and copy it by hand");
}

// A code block with its language and a copy button. Their labels are CSS content, so the
// message's text (what is read aloud, searched, or selected) is only the answer's own.
function codeBlock(pre, onError) {
  const code = pre.querySelector("code");
  const lang = (code?.className.match(/language-([\w+#.-]+)/) || [])[1] || "";
  const button = el("button", { type: "button", class: "copy", "aria-label": "Copy code", title: "Copy code" });
  button.addEventListener("click", async () => {
    try {
      await copyText((code || pre).textContent.replace(/\n$/, "")); // marked ends a block with a newline
      button.dataset.copied = "true";
      setTimeout(() => delete button.dataset.copied, 1500);
    } catch (error) {
      onError?.(error);
    }
  });
  const block = el("div", { class: "code-block", dataset: { lang } });
  pre.replaceWith(block);
  block.append(button, pre);
}

// Renders `text` as sanitised Markdown into `target`, replacing what it held. Called again for
// each streamed delta: the whole answer is parsed each time, so a table or fence closes itself.
export function renderMarkdown(target, text, { onError } = {}) {
  const fragment = purify.sanitize(markdown.parse(text || ""), SANITIZE);
  for (const pre of fragment.querySelectorAll("pre")) codeBlock(pre, onError);
  // whitespace between blocks means nothing in a block layout; dropped, the text reads as written
  for (const node of [...fragment.childNodes]) {
    if (node.nodeType === Node.TEXT_NODE && !node.textContent.trim()) node.remove();
  }
  target.replaceChildren(fragment);
  target.classList.add("md");
}
