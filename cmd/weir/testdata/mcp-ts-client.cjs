// A client of `weir mcp --listen` on the official MCP TypeScript SDK
// (@modelcontextprotocol/sdk, pinned in tools/npm), run by
// cmd/weir/mcp_ts_test.go: node mcp-ts-client.cjs ENDPOINT TOKEN MODE,
// MODE "stateful" or "stateless". It prints one JSON line per step on
// stdout ({"step": ..., ...}); the test answers "register" by
// registering a flow. It exits 1 on the first failed check.
"use strict";
const { Client } = require("@modelcontextprotocol/sdk/client/index.js");
const { StreamableHTTPClientTransport } = require("@modelcontextprotocol/sdk/client/streamableHttp.js");
const { ElicitRequestSchema, ToolListChangedNotificationSchema } = require("@modelcontextprotocol/sdk/types.js");

const [endpoint, token, mode] = process.argv.slice(2);
const t0 = Date.now();
const say = (step, more) => console.log(JSON.stringify({ step, at_ms: Date.now() - t0, ...more }));
const check = (ok, what, got) => {
  if (!ok) {
    say("error", { message: what, got });
    process.exit(1);
  }
};

async function main() {
  const stateful = mode === "stateful";
  const client = new Client({ name: "weir-ts-test", version: "1.0.0" }, { capabilities: stateful ? { elicitation: { form: {} } } : {} });
  let changed = null;
  const listChanged = new Promise((resolve) => (changed = resolve));
  client.setNotificationHandler(ToolListChangedNotificationSchema, () => changed());
  const asked = [];
  if (stateful) {
    client.setRequestHandler(ElicitRequestSchema, (req) => {
      asked.push(req.params.message);
      return { action: "accept", content: { decision: "approve" } };
    });
  }
  const transport = new StreamableHTTPClientTransport(new URL(endpoint), {
    requestInit: { headers: { Authorization: "Bearer " + token } },
  });
  await client.connect(transport);
  say("connected", { version: client.getServerVersion().version, session: transport.sessionId || "" });

  const names = (await client.listTools()).tools.map((t) => t.name).sort();
  for (const n of ["greet", "slowpoke", "approval", "wait_run", "cancel_run", "approve_wait", "reject_wait"]) {
    check(names.includes(n), "tools/list lacks " + n, names);
  }
  say("tools", { names });

  const greet = await client.callTool({ name: "greet", arguments: { name: "ts", weir_request_id: "ts-" + mode } });
  check(!greet.isError && greet.structuredContent.phase === "completed", "greet", greet);
  say("greet", { run_id: greet.structuredContent.run_id });

  // A run that outlasts the server's bound answers early, with its id
  // and phase, well before the client's own 60 s timeout.
  const progress = [];
  const started = Date.now();
  const slow = await client.callTool({ name: "slowpoke", arguments: {} }, undefined, {
    onprogress: (p) => progress.push(p.message),
    resetTimeoutOnProgress: true,
  });
  const sc = slow.structuredContent || {};
  check(!slow.isError && sc.working === true && sc.run_id && ["queued", "running"].includes(sc.phase), "the early answer", slow);
  check(sc.follow && sc.follow.tool === "wait_run", "the early answer names wait_run", sc);
  check(progress.length > 0 && progress[0] === "run " + sc.run_id + " accepted", "progress starts with the run id", progress);
  say("early", { run_id: sc.run_id, phase: sc.phase, ms: Date.now() - started, text: slow.content[0].text });

  // A human wait: asked by elicitation where the client declared it,
  // decided with approve_wait otherwise; either way the run goes on.
  let appr = await client.callTool({ name: "approval", arguments: {} });
  if (stateful) {
    check(asked.length === 1, "one elicitation", asked);
  } else {
    const w = (appr.structuredContent.waits || [])[0];
    check(appr.structuredContent.phase === "waiting" && w && w.wait, "the waiting answer", appr);
    appr = await client.callTool({ name: "approve_wait", arguments: { run_id: appr.structuredContent.run_id, wait: w.wait } });
  }
  check(!appr.isError && appr.structuredContent.phase === "completed", "the approved run completes", appr);
  say("approved", { run_id: appr.structuredContent.run_id, output: appr.structuredContent.output });

  if (stateful) {
    say("register", {});
    const timeout = new Promise((_, reject) => setTimeout(() => reject(new Error("no tools/list_changed in 60 s")), 60000));
    await Promise.race([listChanged, timeout]);
    const again = (await client.listTools()).tools.map((t) => t.name);
    check(again.includes("later"), "the registered flow is listed", again);
    say("changed", {});
  }
  await client.close();
  say("done", {});
  // Keep-alive sockets would hold the process open for a minute.
  process.exit(0);
}

main().catch((err) => {
  say("error", { message: String(err && err.stack ? err.stack : err) });
  process.exit(1);
});
