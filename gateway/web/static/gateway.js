// A small client of the gateway protocol (docs/protocol.md): one WebSocket, requests matched to
// responses by id, events handed to listeners. The page is just another client; the token it
// sends is the only thing that lets it in. Replies are numbered per session (`seq`): a reconnect
// resumes after the last number seen, so an answer given while the page was away still arrives,
// and one that arrives twice is shown once.

export class GatewayError extends Error {
  constructor(code, message) {
    super(message);
    this.code = code;
  }
}

export class Gateway {
  constructor(url, token) {
    this.url = url;
    this.token = token;
    this.ws = null;
    this.nextId = 1;
    this.pending = new Map();
    this.listeners = new Map();
    this.onclose = () => {};
    this.hello = null;
    this.seen = {}; // session -> number of the last reply seen (connect `resume`)
    this.replies = new Set(); // recent replies received ("session seq runId"), to show each once
  }

  // Notes a reply's number; false when this very reply was already received.
  saw(session, seq, runId = "") {
    if (typeof session !== "string" || !Number.isInteger(seq)) return true;
    this.seen[session] = Math.max(seq, this.seen[session] ?? 0);
    if (!runId) return true;
    const key = `${session} ${seq} ${runId}`;
    if (this.replies.has(key)) return false;
    this.replies.add(key);
    if (this.replies.size > 1000) this.replies.delete(this.replies.values().next().value);
    return true;
  }

  // A reply the page already shows from chat.history: the same reply arriving live is not shown again.
  had(session, seq, runId = "") {
    if (typeof session === "string" && Number.isInteger(seq) && runId) this.replies.add(`${session} ${seq} ${runId}`);
  }

  // Resolves with the connect reply; rejects with the server's close reason (e.g. a wrong token).
  connect() {
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(this.url);
      this.ws = ws;
      let opened = false;
      ws.onopen = () => {
        const params = { auth: { token: this.token }, client: { name: "clawgate-web", id: "web" }, subscribe: "*" };
        if (Object.keys(this.seen).length) params.resume = { ...this.seen };
        this.request("connect", params).then((hello) => {
          opened = true;
          this.hello = hello;
          resolve(hello);
        }, reject);
      };
      ws.onmessage = (message) => this.receive(message.data);
      ws.onclose = (event) => {
        for (const { reject: fail } of this.pending.values()) {
          fail(new GatewayError("closed", event.reason || "connection closed"));
        }
        this.pending.clear();
        if (!opened) {
          reject(new GatewayError("closed", event.reason || "could not connect to the gateway"));
        } else {
          this.onclose(event);
        }
      };
    });
  }

  close() {
    if (this.ws) this.ws.close(1000, "logged out");
  }

  request(method, params = {}) {
    const id = `w${this.nextId++}`;
    return new Promise((resolve, reject) => {
      if (!this.ws || this.ws.readyState !== WebSocket.OPEN) {
        reject(new GatewayError("closed", "not connected"));
        return;
      }
      // chat.send reports the session's last reply number: its answer comes after it.
      const done = method === "chat.send" ? (payload) => { this.saw(params.session ?? "main", payload.seq); resolve(payload); } : resolve;
      this.pending.set(id, { resolve: done, reject });
      this.ws.send(JSON.stringify({ type: "req", id, method, params }));
    });
  }

  on(event, listener) {
    if (!this.listeners.has(event)) this.listeners.set(event, []);
    this.listeners.get(event).push(listener);
  }

  receive(data) {
    let frame;
    try {
      frame = JSON.parse(data);
    } catch {
      return;
    }
    if (frame.type === "res") {
      const waiter = this.pending.get(frame.id);
      if (!waiter) return;
      this.pending.delete(frame.id);
      if (frame.ok) waiter.resolve(frame.payload);
      else waiter.reject(new GatewayError(frame.error.code, frame.error.message));
    } else if (frame.type === "event") {
      const p = frame.payload;
      if (frame.event === "chat" && p && !this.saw(p.session, p.seq, p.runId)) return;
      for (const listener of this.listeners.get(frame.event) || []) {
        try {
          listener(frame.payload);
        } catch (error) {
          console.error(`listener for ${frame.event} failed`, error);
        }
      }
    }
  }
}
