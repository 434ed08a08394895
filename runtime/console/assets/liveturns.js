"use strict";
// The live model turn of a run's page: the text of each model turn in
// flight as the provider streams it, from the turn_delta messages of the
// run's stream asked with deltas=1 (docs/agents.md, "Watching tokens
// arrive"). The text is a view, never the record: once the turn is
// journaled (its agent_turn event), it goes, and the turn shows as every
// journaled turn does. A model's output is untrusted: it is inserted as
// text, never as markup.

// Bounds of what a page shows of turns in flight: the text of each, as
// much as the daemon keeps of a turn for watchers who come late
// (engine.MaxTurnDeltaBytes; the rest shows with the journaled turn),
// and how many turns at once (the oldest goes first).
const maxLiveBytes = 64 << 10, maxLiveTurns = 8;
// maxEnded bounds the ended turns a page remembers (see liveTurns).
const maxEnded = 1000;

const utf8 = new TextEncoder();

// liveTurns returns the live turns' box and what feeds it: delta(d) for
// each turn_delta message, event(ev) for each of the run's events (an
// agent_turn, or its node's end, ends a turn), and clear() at the run's
// end. Pieces are placed by their byte offset, so that a stream that
// resumes (Last-Event-ID), opens again or starts a turn over (a turn
// tried again starts at offset 0) shows each piece once, where it goes.
function liveTurns() {
  const box = el("div", { id: "live-turns", hidden: true },
    el("h2", { text: "Live model turn" }),
    el("p", { class: "hint", text: "The text of each model turn in flight, as the provider streams it; it is not journaled, and once the turn is, it shows under Agent turns." }));
  const turns = new Map(); // NODE@VISIT.TURN → { view, text, end, cut }
  // ended holds the turns whose end the page saw, so that a piece that
  // comes after it (a stream's deltas and events are sent apart) does
  // not open the turn again.
  const ended = new Set();
  const drop = (key) => {
    const t = turns.get(key);
    if (t) t.view.remove();
    turns.delete(key);
    ended.add(key);
    if (ended.size > maxEnded) ended.delete(ended.values().next().value);
    box.hidden = turns.size === 0;
  };
  const open = (d, key) => {
    if (turns.size >= maxLiveTurns) drop(turns.keys().next().value);
    const text = document.createTextNode("");
    const view = el("div", { class: "live-turn panel", "data-turn": key, "data-node": d.node },
      el("div", { class: "live-head" }, el("b", { class: "mono", text: d.node + "@" + d.visit }), " turn " + d.turn,
        " ", el("span", { class: "live on", text: "streaming" })),
      el("pre", { class: "live-text" }, text));
    const t = { view, text, end: 0, cut: false };
    turns.set(key, t);
    box.append(view);
    box.hidden = false;
    return t;
  };
  return {
    box,
    delta(d) {
      const key = d.node + "@" + d.visit + "." + d.turn;
      let t = turns.get(key);
      if (ended.has(key)) return;
      if (t && d.offset === 0 && t.end > 0) {
        // The turn starts over (tried again after a crash, or the stream
        // sends what is kept of it from its start): what was shown goes.
        t.view.remove();
        turns.delete(key);
        t = undefined;
      }
      if (!t) t = open(d, key);
      if (t.cut) return;
      let piece = d.text;
      if (d.offset < t.end) { // shown in part already: only what is new
        const b = utf8.encode(piece);
        if (d.offset + b.length <= t.end) return;
        piece = new TextDecoder().decode(b.subarray(t.end - d.offset));
      } else if (d.offset > t.end) {
        t.text.appendData(" […" + (d.offset - t.end) + " bytes not received…] ");
      }
      t.text.appendData(piece);
      t.end = d.offset + utf8.encode(d.text).length;
      if (t.end >= maxLiveBytes) {
        t.cut = true;
        t.view.append(el("p", { class: "hint", text: "The page shows the first " + (maxLiveBytes >> 10) + " KiB of a turn; the rest shows once the turn is journaled." }));
      }
    },
    event(ev) {
      const node = ev.node;
      if (!node) return;
      const turn = ev.type === "agent_turn" && ev.detail ? ev.detail.turn : undefined;
      const nodeEnds = ev.type === "node_completed" || ev.type === "node_failed";
      if (turn === undefined && !nodeEnds) return;
      for (const key of [...turns.keys()]) {
        const k = key.slice(0, key.lastIndexOf("@"));
        if (k === node && (nodeEnds || key.endsWith("." + turn))) drop(key);
      }
    },
    clear() {
      for (const key of [...turns.keys()]) drop(key);
    },
  };
}
