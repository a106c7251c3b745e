// The channels view: each chat channel's state, and "Link" for an account that needs its device linked
// (WhatsApp in linked mode, never linked or logged out; Signal when signal-cli holds no such account). Linking runs in the daemon (`channels.link`):
// the QR codes arrive as `link` events for this page only, as SVG images drawn by the daemon, each new
// code replacing the last; closing the view (Cancel, or leaving the page) stops the pairing.
// WhatsApp also links with a phone number instead: the daemon checks the number, asks WhatsApp for the
// 8-character pairing code and sends it (a `code` event) to this page alone, to be typed on the phone.

import { el, clear } from "./dom.js";

const SVG_URI = "data:image/svg+xml"; // all a code may be: the daemon's own drawing, shown as an image
const PAIRING_CODE = /^[0-9A-Z]{4}-?[0-9A-Z]{4}$/; // WhatsApp's code as whatsmeow gives it (ABCD-EFGH)

function split(name) {
  const [channel, account = "default"] = name.split(".", 2);
  return { channel, account };
}

export class ChannelsPanel {
  constructor(gateway, root, { onError }) {
    this.gateway = gateway;
    this.list = root.querySelector("#channels");
    this.view = root.querySelector("#link-view");
    this.onError = onError;
    this.linking = null; // the channel name being linked from this page
    this.wanted = null; // "qr" or "code": what this page asked for (a code of the other kind is ignored)
    let timer = null;
    gateway.on("tick", () => { clearTimeout(timer); timer = setTimeout(() => this.refresh(), 300); });
    gateway.on("link", (p) => this.onLink(p));
  }

  async refresh() {
    try {
      const s = await this.gateway.request("status");
      const states = Object.values(s.channelStates || {});
      clear(this.list, states.length ? states.map((c) => el("li", { dataset: { channel: c.name } },
        el("span", { class: "name", text: c.name }),
        el("span", { class: "meta", text: ` ${c.state}${c.reason ? ` (${c.reason})` : ""}` }),
        c.needsLink && this.linking !== c.name
          ? el("button", { type: "button", class: "link-device", onclick: () => this.link(c.name), text: "Link" })
          : null))
        : el("li", { class: "empty", text: "No chat channels configured." }));
    } catch (error) {
      this.onError(error);
    }
  }

  // The view for one account: the QR code (or the pairing code), a status line, and for WhatsApp the
  // phone-number form; built once per Link, kept while the owner switches between the two ways.
  build(name) {
    this.shownFor = name;
    this.status = el("p", { class: "link-status", role: "status", text: "Asking for a code…" });
    this.image = el("img", { class: "qr", alt: `QR code to link ${name}`, hidden: true });
    this.code = el("output", { class: "pair-code", "aria-label": `pairing code to link ${name}`, hidden: true });
    this.again = el("button", { type: "button", class: "ask-again", hidden: true, text: "Ask for a new code",
      onclick: () => this.link(name, this.wanted === "code" ? this.phone.value : null) });
    this.closeButton = el("button", { type: "button", class: "secondary", onclick: () => this.cancel(), text: "Cancel" });
    let byPhone = null;
    if (split(name).channel === "whatsapp") {
      this.phone = el("input", { type: "tel", name: "phone", autocomplete: "tel", required: true,
        placeholder: "+15551234567", "aria-label": "phone number with its country code" });
      this.phoneForm = el("form", { class: "link-phone", hidden: true,
        onsubmit: (e) => { e.preventDefault(); this.link(name, this.phone.value); } },
      el("label", { text: "Phone number of the WhatsApp account, with its country code " }, this.phone),
      el("button", { type: "submit", text: "Get a pairing code" }));
      const show = el("button", { type: "button", class: "link by-phone", text: "Link with a phone number instead",
        onclick: () => { show.hidden = true; this.phoneForm.hidden = false; this.phone.focus(); } });
      byPhone = [show, this.phoneForm];
    }
    clear(this.view, el("h3", { text: `Link ${name}` }), this.image, this.code, this.status, byPhone,
      this.again, this.closeButton);
    this.view.hidden = false;
  }

  // Start (or restart) linking `name`: its QR codes, or with `phone` WhatsApp's pairing code for that number.
  async link(name, phone = null) {
    if (this.linking && this.linking !== name) await this.cancel();
    if (this.shownFor !== name || this.view.hidden) this.build(name);
    const asked = phone === null ? "qr" : "code";
    const before = { linking: this.linking, wanted: this.wanted };
    this.linking = name;
    this.wanted = asked; // set before asking: a code of the other kind still on its way is ignored
    this.status.className = "link-status";
    this.status.textContent = asked === "code" ? "Asking WhatsApp for a pairing code…" : "Asking for a code…";
    this.again.hidden = true;
    this.closeButton.textContent = "Cancel";
    await this.refresh();
    try {
      await this.gateway.request("channels.link", phone === null ? split(name) : { ...split(name), phone: phone.trim() });
    } catch (error) {
      if (asked === "code" && before.linking === name) { // a bad number: the QR codes go on as they were
        Object.assign(this, before);
        this.status.textContent = error.message;
        this.status.className = "link-status bad";
        return;
      }
      this.finish(error.message, "bad");
      return;
    }
    if (asked === "code") this.showImage(null);
  }

  showImage(src) {
    if (src) { this.image.src = src; this.image.hidden = false; } else { this.image.removeAttribute("src"); this.image.hidden = true; }
  }

  onLink(p) {
    if (!p || p.channel !== this.linking) return;
    if (p.state === "qr" && this.wanted === "qr" && typeof p.image === "string" && p.image.startsWith(SVG_URI)) {
      this.showImage(p.image);
      this.status.className = "link-status";
      this.status.textContent = p.channel.startsWith("signal")
        ? "Scan it in Signal on the phone: Settings → Linked devices → Link new device."
        : "Scan with WhatsApp → Settings → Linked devices → Link a device. A new code comes every 20 seconds.";
    } else if (p.state === "code" && this.wanted === "code" && typeof p.code === "string" && PAIRING_CODE.test(p.code)) {
      this.showImage(null);
      this.code.textContent = p.code;
      this.code.hidden = false;
      this.status.className = "link-status";
      this.status.textContent = "On the phone: WhatsApp → Settings → Linked devices → Link a device → " +
        "Link with phone number instead, and type this code. It expires after a few minutes.";
    } else if (p.state === "line") {
      this.status.textContent = p.text;
    } else if (p.state === "linked") {
      this.finish(`${p.text}. ${p.started ? "Its channel is starting." : "Restart the daemon to start it."}`, "ok");
    } else if (p.state === "error") {
      this.finish(p.text, "bad");
      this.again.hidden = false; // an expired or refused code: ask again (the number stays in the form)
    }
  }

  // The pairing is over (linked or failed): the code goes, the outcome stays until closed.
  finish(text, kind) {
    this.linking = null;
    if (this.image) this.showImage(null);
    if (this.code) { this.code.textContent = ""; this.code.hidden = true; }
    this.status.textContent = text;
    this.status.className = `link-status ${kind}`;
    this.closeButton.textContent = "Close";
    this.refresh();
  }

  async cancel() {
    const name = this.linking;
    this.linking = null;
    this.wanted = null;
    this.shownFor = null;
    this.view.hidden = true;
    clear(this.view);
    if (name) {
      try {
        await this.gateway.request("channels.link.cancel", split(name));
      } catch (error) {
        if (error.code !== "not_found") this.onError(error);
      }
    }
    await this.refresh();
  }
}
