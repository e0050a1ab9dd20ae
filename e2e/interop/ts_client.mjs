// ts_client.mjs drives a running mcpswarm node with the official TypeScript
// MCP SDK over Streamable HTTP: it starts a session of the login demo, signs
// in through the session's derived tools, reads the session's widgets
// resource, and stops the session.
//
// Usage: node ts_client.mjs http://127.0.0.1:PORT/mcp
//
// Prints one line per step ("step: detail") and, when every check held, a
// closing line "interop: ok session=<id> …". Any failed check prints
// "interop: FAIL <why>" on stderr and exits 1.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';

const url = process.argv[2];
if (!url) {
  console.error('usage: node ts_client.mjs http://127.0.0.1:PORT/mcp');
  process.exit(2);
}

class CheckError extends Error {}
function check(cond, why) {
  if (!cond) throw new CheckError(why);
}

// textOf returns the concatenated text content of a tool result.
function textOf(result) {
  return (result.content ?? []).filter((c) => c.type === 'text').map((c) => c.text).join('\n');
}

// findWidget returns the node of a widget tree (as swarm://session/<id>/widgets
// serves it) whose id is id.
function findWidget(node, id) {
  if (!node || typeof node !== 'object') return undefined;
  if (node.id === id) return node;
  for (const child of node.children ?? []) {
    const hit = findWidget(child, id);
    if (hit) return hit;
  }
  return undefined;
}

// callOK calls a tool and fails unless the call succeeded.
async function callOK(client, name, args) {
  const res = await client.callTool({ name, arguments: args });
  check(!res.isError, `${name} answered a tool error: ${textOf(res)}`);
  return res;
}

// waitFor resolves once pred() holds, polling every 10 ms for up to ms.
async function waitFor(pred, ms, what) {
  const deadline = Date.now() + ms;
  while (!pred()) {
    check(Date.now() < deadline, `timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

async function main() {
  const client = new Client({ name: 'mcpswarm-interop', version: '1.0.0' }, { capabilities: {} });
  const transport = new StreamableHTTPClientTransport(new URL(url));
  let listChanged = 0;
  client.setNotificationHandler(ToolListChangedNotificationSchema, () => { listChanged++; });

  await client.connect(transport);
  const info = client.getServerVersion();
  check(transport.sessionId, 'the server did not assign an Mcp-Session-Id');
  console.log(`connected: server=${info?.name} protocol=${transport.protocolVersion ?? 'unknown'} session-id=${transport.sessionId.length} chars`);

  try {
    const before = await client.listTools();
    const staticNames = before.tools.map((t) => t.name);
    for (const n of ['swarm_apps', 'swarm_start', 'swarm_list', 'swarm_stop']) {
      check(staticNames.includes(n), `tools/list lacks ${n}: ${staticNames.join(', ')}`);
    }
    console.log(`tools: ${before.tools.length} before start`);

    const apps = textOf(await callOK(client, 'swarm_apps', {}));
    check(apps.includes('login'), `swarm_apps does not offer login: ${apps}`);

    const started = JSON.parse(textOf(await callOK(client, 'swarm_start', { app: 'login' })));
    const id = started.id;
    check(/^[a-z][a-z0-9]{0,6}$/.test(id ?? ''), `swarm_start answered no valid id: ${JSON.stringify(started)}`);
    check(started.app === 'login', `swarm_start started ${started.app}, not login`);
    console.log(`started: session=${id} app=${started.app} owner=${started.owner}`);

    await waitFor(() => listChanged > 0, 5000, 'notifications/tools/list_changed after swarm_start');
    const after = await client.listTools();
    const derived = after.tools.map((t) => t.name).filter((n) => n.startsWith(`${id}.`)).sort();
    for (const n of [`${id}.username.type_into`, `${id}.password.type_into`, `${id}.submit.click`]) {
      check(derived.includes(n), `tools/list lacks ${n}; derived tools: ${derived.join(', ')}`);
    }
    console.log(`list_changed: ${listChanged}; derived tools: ${derived.length} (${derived.slice(0, 4).join(', ')}, …)`);

    await callOK(client, `${id}.username.type_into`, { text: 'demo' });
    await callOK(client, `${id}.password.type_into`, { text: 'hunter2' });
    const clicked = await callOK(client, `${id}.submit.click`, {});
    console.log(`signed in: ${textOf(clicked).split('\n')[0].slice(0, 120)}`);

    const uri = `swarm://session/${id}/widgets`;
    const listed = (await client.listResources()).resources.map((r) => r.uri);
    check(listed.includes(uri), `resources/list lacks ${uri}: ${listed.join(', ')}`);
    const read = await client.readResource({ uri });
    check(read.contents?.length === 1, `${uri} answered ${read.contents?.length ?? 0} contents`);
    const body = read.contents[0].text ?? '';
    check(!body.includes('hunter2'), `${uri} leaks the password`);
    const tree = JSON.parse(body);
    const status = findWidget(tree, 'status')?.state?.items?.[0];
    check(status === 'Signed in as demo.', `${uri}: status widget reads ${JSON.stringify(status)}, want "Signed in as demo."`);
    const greeting = findWidget(tree, 'greeting')?.state;
    console.log(`resource: ${uri} (${read.contents[0].mimeType}) status "${status}" greeting ${JSON.stringify(greeting?.text ?? greeting)}`);

    const model = JSON.parse((await client.readResource({ uri: `swarm://session/${id}/model/status` })).contents[0].text);
    check(model.user === 'demo' && model.locked === false, `model/status reads ${JSON.stringify(model)}`);
    console.log(`model: user=${model.user} locked=${model.locked}`);

    const beforeStop = listChanged;
    await callOK(client, 'swarm_stop', { id });
    await waitFor(() => listChanged > beforeStop, 5000, 'notifications/tools/list_changed after swarm_stop');
    const remaining = textOf(await callOK(client, 'swarm_list', {}));
    check(!remaining.includes(`"${id}"`), `swarm_list still shows ${id} after swarm_stop: ${remaining}`);
    console.log(`stopped: session=${id}`);
    console.log(`interop: ok session=${id} derived-tools=${derived.length} list-changed=${listChanged}`);
  } finally {
    await transport.terminateSession().catch(() => {});
    await client.close();
  }
}

main().catch((err) => {
  console.error(`interop: FAIL ${err instanceof CheckError ? err.message : err?.stack ?? err}`);
  process.exit(1);
});
