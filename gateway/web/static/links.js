// The channels view: each chat channel's state, and "Link" for an account that needs its device linked
// (WhatsApp in linked mode, never linked or logged out; Signal when signal-cli holds no such account). Linking runs in the daemon (`channels.link`):
// the QR codes arrive as `link` events for this page only, as SVG images drawn by the daemon, each new
// code replacing the last; closing the view (Cancel, or leaving the page) stops the pairing.

import { el, clear } from "./dom.js";

const SVG_URI = "data:image/svg+xml"; // all a code may be: the daemon's own drawing, shown as an image

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

  async link(name) {
    if (this.linking) await this.cancel();
    this.linking = name;
    this.status = el("p", { class: "link-status", role: "status", text: "Asking for a code…" });
    this.image = el("img", { class: "qr", alt: `QR code to link ${name}`, hidden: true });
    this.closeButton = el("button", { type: "button", class: "secondary", onclick: () => this.cancel(), text: "Cancel" });
    clear(this.view, el("h3", { text: `Link ${name}` }), this.image, this.status, this.closeButton);
    this.view.hidden = false;
    await this.refresh();
    try {
      await this.gateway.request("channels.link", split(name));
    } catch (error) {
      this.finish(error.message, "bad");
    }
  }

  onLink(p) {
    if (!p || p.channel !== this.linking) return;
    if (p.state === "qr" && typeof p.image === "string" && p.image.startsWith(SVG_URI)) {
      this.image.src = p.image;
      this.image.hidden = false;
      this.status.textContent = p.channel.startsWith("signal")
        ? "Scan it in Signal on the phone: Settings → Linked devices → Link new device."
        : "Scan with WhatsApp → Settings → Linked devices → Link a device. A new code comes every 20 seconds.";
    } else if (p.state === "line") {
      this.status.textContent = p.text;
    } else if (p.state === "linked") {
      this.finish(`${p.text}. ${p.started ? "Its channel is starting." : "Restart the daemon to start it."}`, "ok");
    } else if (p.state === "error") {
      this.finish(p.text, "bad");
    }
  }

  // The pairing is over (linked or failed): the code goes, the outcome stays until closed.
  finish(text, kind) {
    this.linking = null;
    if (this.image) { this.image.removeAttribute("src"); this.image.hidden = true; }
    this.status.textContent = text;
    this.status.className = `link-status ${kind}`;
    this.closeButton.textContent = "Close";
    this.refresh();
  }

  async cancel() {
    const name = this.linking;
    this.linking = null;
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
