// ts_tasks.mjs drives the experimental tasks of the 2025-11-25 revision
// (SEP-1686) on three mcpswarm nodes with the official TypeScript SDK's
// client (client.experimental.tasks): tasks created through node1 are
// polled through node2 and node3, one is cancelled from node3, one's
// result is awaited through node3 (tasks/result blocks until it ends), and
// after node1 is killed its finished task still answers its result on
// node2 while the one it was running ends failed.
//
// Usage: node ts_tasks.mjs URL1 URL2 URL3 TOKEN   (URLs of /mcp)
//
// The test that runs it kills node1: the script prints "kill: node1" and
// waits for a line "killed" on stdin. Prints one line per step and, when
// every check held, "tasks: ok"; a failed check prints "tasks: FAIL <why>"
// on stderr and exits 1.
import { createInterface } from 'node:readline';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';

const [url1, url2, url3, token] = process.argv.slice(2);
if (!token) {
  console.error('usage: node ts_tasks.mjs URL1 URL2 URL3 TOKEN');
  process.exit(2);
}

class CheckError extends Error {}
function check(cond, why) {
  if (!cond) throw new CheckError(why);
}

const TTL = 10 * 60 * 1000;
const terminal = (s) => ['completed', 'failed', 'cancelled'].includes(s);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const textOf = (result) => (result?.content ?? []).filter((c) => c.type === 'text').map((c) => c.text).join('\n');

async function connect(url, name) {
  const client = new Client({ name: `mcpswarm-tasks-${name}`, version: '1.0.0' }, { capabilities: {} });
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
  await client.connect(transport);
  client.node = name;
  return client;
}

// start creates a slow_compute task through client with the SDK's
// streaming call and returns its task as soon as the SDK reports it
// created (the generator is closed there: polling is the test's).
async function start(client, seconds, label) {
  const stream = client.experimental.tasks.callToolStream(
    { name: 'slow_compute', arguments: { seconds, label } }, undefined, { task: { ttl: TTL } });
  for await (const message of stream) {
    check(message.type === 'taskCreated', `slow_compute ${label} on ${client.node}: first message ${message.type}: ${message.error ?? ''}`);
    return message.task;
  }
  throw new CheckError(`slow_compute ${label} on ${client.node}: the stream ended without a task`);
}

// awaitStatus polls taskId through the clients in turn until pred holds;
// every poll must answer the task.
async function awaitStatus(clients, taskId, pred, what, ms) {
  const deadline = Date.now() + ms;
  for (let i = 0; ; i++) {
    const c = clients[i % clients.length];
    const task = await c.experimental.tasks.getTask(taskId);
    check(task.taskId === taskId, `tasks/get ${taskId} on ${c.node} answered task ${task.taskId}`);
    if (pred(task)) return task;
    check(Date.now() < deadline, `task ${taskId} not ${what} within ${ms} ms; last on ${c.node}: ${JSON.stringify(task)}`);
    await sleep(50);
  }
}

// rejects returns the McpError promise p rejects with, failing if it resolves.
async function rejects(p, what) {
  try {
    const v = await p;
    throw new CheckError(`${what} answered ${JSON.stringify(v)}, want an error`);
  } catch (err) {
    if (err instanceof CheckError) throw err;
    return err;
  }
}

function waitForLine(want) {
  const rl = createInterface({ input: process.stdin });
  return new Promise((resolve, reject) => {
    rl.on('line', (line) => { if (line.trim() === want) { resolve(); rl.close(); } });
    rl.on('close', () => reject(new CheckError(`stdin closed before "${want}"`)));
  });
}

async function main() {
  const [c1, c2, c3] = [await connect(url1, 'node1'), await connect(url2, 'node2'), await connect(url3, 'node3')];
  const survivors = [c2, c3];
  try {
    for (const c of [c1, c2, c3]) {
      const caps = c.getServerCapabilities();
      check(caps?.tasks?.requests?.tools?.call, `${c.node} does not declare tasks.requests.tools.call: ${JSON.stringify(caps)}`);
      const tools = await c.listTools();
      const slow = tools.tools.find((t) => t.name === 'slow_compute');
      check(slow?.execution?.taskSupport === 'optional', `${c.node} lists slow_compute with execution ${JSON.stringify(slow?.execution)}`);
    }
    console.log(`connected: 3 nodes, protocol ${c1.transport?.protocolVersion ?? 'unknown'}, tasks capability on each`);

    // A: created through node1, polled through node2 and node3.
    const a = await start(c1, 2, 'a');
    check(a.status === 'working' && a.ttl > 0, `A was created ${JSON.stringify(a)}`);
    const seenA = new Set();
    const doneA = await awaitStatus(survivors, a.taskId, (t) => { seenA.add(t.status); return terminal(t.status); }, 'terminal', 20000);
    check(doneA.status === 'completed', `A ended ${doneA.status}`);
    const resultA = await c3.experimental.tasks.getTaskResult(a.taskId, CallToolResultSchema);
    const textA = textOf(resultA);
    check(textA.includes('"a"') && !resultA.isError, `tasks/result of A on node3: ${JSON.stringify(resultA)}`);
    console.log(`A: created on node1, seen ${[...seenA].join(' → ')} on node2/node3, result "${textA}"`);

    // B: running on node1, cancelled from node3.
    const b = await start(c1, 60, 'b');
    const cancelled = await c3.experimental.tasks.cancelTask(b.taskId);
    check(cancelled.taskId === b.taskId && cancelled.status === 'cancelled', `tasks/cancel of B on node3 answered ${JSON.stringify(cancelled)}`);
    const readB = await c2.experimental.tasks.getTask(b.taskId);
    check(readB.status === 'cancelled', `B reads ${readB.status} on node2 after its cancel`);
    const again = await rejects(c3.experimental.tasks.cancelTask(b.taskId), 'tasks/cancel of the cancelled B');
    check(again.code === -32602, `cancelling B again answered ${again.code} ${again.message}, want -32602`);
    console.log(`B: created on node1, cancelled from node3, reads cancelled on node2; a second cancel: ${again.code}`);

    // E: the SDK's whole streaming call on node2, from creation to result.
    const kinds = [];
    let textE = '';
    for await (const m of c2.experimental.tasks.callToolStream(
      { name: 'slow_compute', arguments: { seconds: 1, label: 'e' } }, undefined, { task: { ttl: TTL } })) {
      kinds.push(m.type);
      if (m.type === 'error') throw new CheckError(`streaming slow_compute e on node2: ${m.error}`);
      if (m.type === 'result') textE = textOf(m.result);
    }
    check(kinds[0] === 'taskCreated' && kinds.at(-1) === 'result' && textE.includes('"e"'), `streaming call on node2: ${kinds.join(',')} "${textE}"`);
    console.log(`E: callToolStream on node2: ${kinds.length} messages, result "${textE}"`);

    // F: created through node1; tasks/result through node3 waits for it.
    const f = await start(c1, 2, 'f');
    const resultF = await c3.experimental.tasks.getTaskResult(f.taskId, CallToolResultSchema);
    check(textOf(resultF).includes('"f"'), `tasks/result of F on node3 (blocking): ${JSON.stringify(resultF)}`);
    console.log(`F: tasks/result on node3 waited for node1's task: "${textOf(resultF)}"`);

    // Every node lists this principal's tasks.
    for (const c of survivors) {
      const ids = [];
      let cursor;
      do {
        const page = await c.experimental.tasks.listTasks(cursor);
        ids.push(...page.tasks.map((t) => t.taskId));
        cursor = page.nextCursor;
      } while (cursor);
      for (const t of [a, b, f]) check(ids.includes(t.taskId), `tasks/list on ${c.node} lacks ${t.taskId}`);
    }
    console.log('list: node2 and node3 list A, B and F');

    // D is still running on node1 when it is killed.
    const d = await start(c1, 600, 'd');
    await c2.experimental.tasks.getTask(d.taskId);
    console.log('kill: node1');
    await waitForLine('killed');

    // Through the failover A answers its result, and D ends failed.
    const doneD = await awaitStatus(survivors, d.taskId, (t) => {
      check(t.status === 'working' || t.status === 'failed', `D reads ${t.status} after node1's loss`);
      return t.status === 'failed';
    }, 'failed', 30000);
    for (const c of survivors) {
      const readA = await c.experimental.tasks.getTask(a.taskId);
      check(readA.status === 'completed', `A reads ${readA.status} on ${c.node} after node1's loss`);
      const again = await c.experimental.tasks.getTaskResult(a.taskId, CallToolResultSchema);
      check(textOf(again) === textA, `tasks/result of A on ${c.node} after node1's loss: ${JSON.stringify(again)}`);
    }
    const errD = await rejects(c2.experimental.tasks.getTaskResult(d.taskId, CallToolResultSchema), 'tasks/result of the failed D');
    check(/node1/.test(errD.message), `tasks/result of D answered ${errD.code} ${errD.message}, want an error naming node1`);
    console.log(`after kill: A's result reads the same on node2 and node3; D ${doneD.status}: ${errD.message}`);
    console.log(`tasks: ok created=5 cancelled=1 lost=1`);
  } finally {
    for (const c of [c1, c2, c3]) await c.close().catch(() => {});
  }
}

// Exit when done: the client of the killed node1 may still be retrying its
// standalone GET stream, which would keep the process alive.
main().then(() => process.exit(0), (err) => {
  console.error(`tasks: FAIL ${err instanceof CheckError ? err.message : err?.stack ?? err}`);
  process.exit(1);
});
