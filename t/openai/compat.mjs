// compat.mjs — drives one of drover's inference addresses with the official
// openai client (t/openai/node_modules, installed by scripts/install-deps
// from package-lock.json): models list and retrieve, chat completions plain
// and streamed, completions plain and streamed, and the errors an OpenAI
// client meets (unknown model, bad request, bad token) as the SDK's error
// classes with OpenAI's error shape. Prints one "ok - …" / "FAIL - …" line
// per check (t/openai.sh counts them), each prefixed with LABEL.
//
// Environment: BASE (the address, e.g. http://127.0.0.1:8080; the client
// gets BASE/openai/v1), TOKEN (a predict-scoped token), MODEL (a ready
// deployment of the token's user), CREATED (its created_at, epoch seconds:
// every address must answer the same), LABEL (names the address).
import OpenAI, { APIError, AuthenticationError, BadRequestError, NotFoundError } from 'openai';

const { BASE, TOKEN, MODEL, LABEL } = process.env;
const CREATED = Number(process.env.CREATED);
let failed = 0;
const ok = (name) => console.log(`ok - ${LABEL}: ${name}`);
const fail = (name, why) => {
  failed++;
  console.log(`FAIL - ${LABEL}: ${name}`);
  if (why) console.log(String(why).split('\n').slice(0, 12).map((l) => '    # ' + l).join('\n'));
};

// check NAME FN: FN resolves to true; false or an exception is a failure
// (FN may return a string: the failure's context).
async function check(name, fn) {
  try {
    const r = await fn();
    if (r === true) ok(name); else fail(name, r === false ? '' : r);
  } catch (e) {
    fail(name, e.stack || e.message);
  }
}

// rejects NAME CLASS STATUS TYPE FN: FN throws the SDK's CLASS (an APIError)
// with STATUS, and the body's error is OpenAI's {message, type, param, code}
// (code a string, or null as OpenAI's own often is).
async function rejects(name, cls, status, type, fn) {
  await check(name, async () => {
    try {
      await fn();
      return 'no error was raised';
    } catch (e) {
      const body = e.error;
      const shaped = body && typeof body.message === 'string' && body.message.length > 0 &&
        body.type === type && 'param' in body && 'code' in body &&
        (typeof body.code === 'string' || body.code === null);
      if (e instanceof cls && e instanceof APIError && e.status === status && shaped &&
          e.type === type)
        return true;
      return `got ${e.constructor.name} status ${e.status}: ${JSON.stringify(body ?? e.message)}`;
    }
  });
}

const client = new OpenAI({ baseURL: `${BASE}/openai/v1`, apiKey: TOKEN, maxRetries: 0, timeout: 120000 });
const words = (s) => (s || '').split(' ').filter((w) => w).length;
const show = (x) => JSON.stringify(x).slice(0, 1200);

await check('models.list() lists the deployment with its created time', async () => {
  const all = [];
  for await (const m of client.models.list()) all.push(m);
  const m = all.find((x) => x.id === MODEL);
  return (m && m.object === 'model' && m.created === CREATED && typeof m.owned_by === 'string') ||
    `want created ${CREATED}: ${show(all)}`;
});

await check('models.retrieve() answers the same model', async () => {
  const m = await client.models.retrieve(MODEL);
  return (m.id === MODEL && m.object === 'model' && m.created === CREATED &&
          typeof m.owned_by === 'string') || show(m);
});

await rejects('models.retrieve() of an unknown model raises NotFoundError', NotFoundError, 404,
  'invalid_request_error', () => client.models.retrieve('no-such-model'));

await check('chat.completions.create()', async () => {
  const r = await client.chat.completions.create({
    model: MODEL, max_tokens: 3, messages: [{ role: 'user', content: 'hello' }],
  });
  const c = r.choices[0];
  return (r.object === 'chat.completion' && typeof r.id === 'string' && r.model === MODEL &&
          Number.isInteger(r.created) && r.created > 0 && r.choices.length === 1 &&
          c.message.role === 'assistant' && words(c.message.content) === 3 &&
          c.finish_reason === 'length' && r.usage.completion_tokens === 3) || show(r);
});

await check('chat.completions.create({stream: true}): chunks with model and created, ' +
            'a final one with finish_reason, then the usage', async () => {
  const stream = await client.chat.completions.create({
    model: MODEL, max_tokens: 4, stream: true, stream_options: { include_usage: true },
    messages: [{ role: 'user', content: 'stream please' }],
  });
  const chunks = [];
  for await (const ch of stream) chunks.push(ch);
  const ids = new Set(chunks.map((ch) => ch.id));
  const text = chunks.map((ch) => ch.choices[0]?.delta?.content ?? '').join('');
  const finishes = chunks.filter((ch) => ch.choices[0]?.finish_reason);
  const withChoice = chunks.filter((ch) => ch.choices.length > 0);
  const last = chunks[chunks.length - 1];
  const good = chunks.length >= 3 && ids.size === 1 &&
    chunks.every((ch) => ch.object === 'chat.completion.chunk' && ch.model === MODEL &&
                         Number.isInteger(ch.created) && ch.created > 0) &&
    chunks[0].choices[0]?.delta?.role === 'assistant' && words(text) === 4 &&
    finishes.length === 1 && finishes[0] === withChoice[withChoice.length - 1] &&
    finishes[0].choices[0].finish_reason === 'length' &&
    last.choices.length === 0 && last.usage?.completion_tokens === 4;
  return good || show(chunks);
});

await check('completions.create()', async () => {
  const r = await client.completions.create({ model: MODEL, prompt: 'once upon', max_tokens: 2 });
  const c = r.choices[0];
  return (r.object === 'text_completion' && r.model === MODEL && Number.isInteger(r.created) &&
          r.created > 0 && words(c.text) === 2 && c.finish_reason === 'length' &&
          r.usage.completion_tokens === 2) || show(r);
});

await check('completions.create({stream: true}): a final chunk with finish_reason', async () => {
  const stream = await client.completions.create({
    model: MODEL, prompt: 'once upon', max_tokens: 3, stream: true,
  });
  const chunks = [];
  for await (const ch of stream) chunks.push(ch);
  const text = chunks.map((ch) => ch.choices[0]?.text ?? '').join('');
  const last = chunks[chunks.length - 1];
  return (chunks.length === 4 && words(text) === 3 &&
          chunks.every((ch) => ch.model === MODEL && Number.isInteger(ch.created)) &&
          last.choices[0].finish_reason === 'length' &&
          chunks.slice(0, -1).every((ch) => ch.choices[0].finish_reason === null)) || show(chunks);
});

await rejects('chat with an unknown model raises NotFoundError', NotFoundError, 404,
  'invalid_request_error', () => client.chat.completions.create({
    model: 'no-such-model', messages: [{ role: 'user', content: 'x' }],
  }));

await rejects('streamed chat with an unknown model raises NotFoundError', NotFoundError, 404,
  'invalid_request_error', async () => {
    const s = await client.chat.completions.create({
      model: 'no-such-model', stream: true, messages: [{ role: 'user', content: 'x' }],
    });
    for await (const ch of s) void ch;
  });

await rejects('a request the model refuses raises BadRequestError', BadRequestError, 400,
  'invalid_request_error', () => client.chat.completions.create({ model: MODEL, messages: [] }));

await rejects('a bad token raises AuthenticationError', AuthenticationError, 401,
  'authentication_error', () =>
    new OpenAI({ baseURL: `${BASE}/openai/v1`, apiKey: 'drv_' + '0'.repeat(64), maxRetries: 0 })
      .models.list());

process.exit(failed ? 1 : 0);
