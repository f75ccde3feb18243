// Drives a running `strata serve` with the official OpenAI client, as users' scripts do, and
// checks what they rely on: completions and chat, streamed and not, greedy output equal to
// `strata generate --temp 0` for the same prompt, usage, stop strings, 16 concurrent streams
// that all complete with the right text, and logprobs (completions and chat, streamed and not)
// against the log-softmax of `strata logits` for the same prompt. tests/server/test_serve.cpp starts the server and runs this.
//   STRATA_URL=http://127.0.0.1:PORT STRATA_BIN=build/strata STRATA_MODEL=models/m.gguf \
//     STRATA_API_KEY=KEY node serve_test.js
// Prints one line per check; exits 1 at the first failure (with the reason), 0 when all passed.
'use strict';
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const OpenAI = require('openai').default;

const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set`);
  return v;
};
const client = new OpenAI({ baseURL: env('STRATA_URL') + '/v1', apiKey: env('STRATA_API_KEY'), maxRetries: 0 });
const N = 24;  // tokens per request: long enough to differ between prompts, short for CPU time

// What `strata generate` prints (its trailing newline removed): the reference for greedy output.
function generate(prompt, chat) {
  const args = ['generate', '-m', env('STRATA_MODEL'), '--device', 'cpu', '-q', '-p', prompt, '-n', String(N),
                '--temp', '0'];
  if (chat) args.push('--chat');
  const out = execFileSync(env('STRATA_BIN'), args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
  return out.endsWith('\n') ? out.slice(0, -1) : out;
}

// The reference log-probabilities of the prompt's next token: log-softmax (in doubles) of the
// logits `strata logits` writes for its last position.
function referenceLogprobs(prompt) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'strata-logprobs-'));
  const out = path.join(dir, 'logits.f32');
  try {
    execFileSync(env('STRATA_BIN'), ['logits', '-m', env('STRATA_MODEL'), '--device', 'cpu', '-p', prompt, '-o', out],
                 { stdio: ['ignore', 'ignore', 'ignore'] });
    const buf = fs.readFileSync(out);
    const l = new Float32Array(buf.buffer, buf.byteOffset, buf.length / 4);
    let mx = -Infinity;
    for (const x of l) mx = Math.max(mx, x);
    let sum = 0;
    for (const x of l) sum += Math.exp(x - mx);
    const lse = mx + Math.log(sum);
    return Array.from(l, (x) => x - lse);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

const close = (a, b) => Math.abs(a - b) <= 1e-4;
const descending = (xs) => xs.every((x, i) => i === 0 || xs[i - 1] >= x);

let checks = 0;
function check(cond, what, detail) {
  if (!cond) {
    console.error(`FAIL: ${what}${detail === undefined ? '' : ': ' + JSON.stringify(detail)}`);
    process.exit(1);
  }
  ++checks;
  console.log(`ok ${what}`);
}

async function streamText(stream, chat) {
  let text = '', finish = null, usage = null;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    const c = chunk.choices[0];
    if (!c) continue;
    text += (chat ? c.delta.content : c.text) || '';
    if (c.finish_reason) finish = c.finish_reason;
  }
  return { text, finish, usage };
}

async function main() {
  // Every reference first: execFileSync blocks node's event loop, and a keep-alive connection the
  // server closed meanwhile (idle > its 5 s) would otherwise be reused before undici notices.
  const prompt = 'The capital of France is';
  const want = generate(prompt, false);
  const wantChat = generate('Tell me a story about a dragon.', true);
  const prompts = Array.from({ length: 16 }, (_, i) => `Story number ${i}: once upon a time`);
  const wants = prompts.map((p) => generate(p, false));
  const refLogprobs = referenceLogprobs(prompt);

  const models = await client.models.list();
  check(models.data.length === 1 && typeof models.data[0].id === 'string', 'GET /v1/models lists the model',
        models.data);
  const model = models.data[0].id;

  const c = await client.completions.create({ model, prompt, max_tokens: N, temperature: 0 });
  check(c.object === 'text_completion' && c.choices.length === 1, 'completion object', c);
  check(c.choices[0].text === want, 'greedy completion equals strata generate', { got: c.choices[0].text, want });
  check(c.usage && c.usage.completion_tokens <= N && c.usage.prompt_tokens > 0 &&
        c.usage.total_tokens === c.usage.prompt_tokens + c.usage.completion_tokens, 'completion usage', c.usage);
  check(['stop', 'length'].includes(c.choices[0].finish_reason), 'completion finish_reason', c.choices[0]);

  const s = await streamText(await client.completions.create(
      { model, prompt, max_tokens: N, temperature: 0, stream: true, stream_options: { include_usage: true } }), false);
  check(s.text === want, 'streamed greedy completion equals strata generate', { got: s.text, want });
  check(s.finish === c.choices[0].finish_reason && s.usage && s.usage.completion_tokens === c.usage.completion_tokens,
        'streamed completion finish and usage', s);

  const msgs = [{ role: 'user', content: 'Tell me a story about a dragon.' }];
  const ch = await client.chat.completions.create({ model, messages: msgs, max_tokens: N, temperature: 0 });
  check(ch.object === 'chat.completion' && ch.choices[0].message.role === 'assistant', 'chat completion object', ch);
  check(ch.choices[0].message.content === wantChat, 'greedy chat equals strata generate --chat',
        { got: ch.choices[0].message.content, want: wantChat });
  const cs = await streamText(await client.chat.completions.create(
      { model, messages: msgs, max_tokens: N, temperature: 0, stream: true }), true);
  check(cs.text === wantChat, 'streamed greedy chat equals strata generate --chat', { got: cs.text, want: wantChat });

  // A stop string: the text ends just before its first occurrence.
  if (want.length > 6) {
    const stop = want.slice(3, 6);
    const st = await client.completions.create({ model, prompt, max_tokens: N, temperature: 0, stop: [stop] });
    const cut = want.slice(0, want.indexOf(stop));
    check(st.choices[0].text === cut && st.choices[0].finish_reason === 'stop', 'stop string ends the text',
          { got: st.choices[0].text, want: cut, stop });
  }

  // Same seed, same sampled text: each session keeps its own sampler and seed.
  const sampled = () => client.completions.create({ model, prompt, max_tokens: N, temperature: 0.9, seed: 1234 });
  const [a, b] = await Promise.all([sampled(), sampled()]);
  check(a.choices[0].text === b.choices[0].text, 'same seed gives the same sampled text concurrently',
        [a.choices[0].text, b.choices[0].text]);

  // 16 concurrent streams over different prompts: each complete and equal to its own greedy text.
  const results = await Promise.all(prompts.map(async (p) => streamText(await client.completions.create(
      { model, prompt: p, max_tokens: N, temperature: 0, stream: true }), false)));
  results.forEach((r, i) => check(r.text === wants[i] && r.finish !== null, `concurrent stream ${i} complete and equal`,
                                  { got: r.text, want: wants[i] }));

  await checkLogprobs(model, prompt, msgs, refLogprobs);

  // Errors arrive as the client's typed exceptions.
  try {
    await client.completions.create({ model, prompt, max_tokens: 'many' });
    check(false, 'wrong type is rejected');
  } catch (e) {
    check(e instanceof OpenAI.BadRequestError && e.param === 'max_tokens', 'wrong type gives BadRequestError', e.error);
  }
  for (const [req, param] of [[{ logprobs: 21 }, 'logprobs'], [{ logprobs: -1 }, 'logprobs']]) {
    try {
      await client.completions.create({ model, prompt, max_tokens: 2, ...req });
      check(false, `completions ${JSON.stringify(req)} is rejected`);
    } catch (e) {
      check(e instanceof OpenAI.BadRequestError && e.status === 400 && e.param === param && e.error.message,
            `completions ${JSON.stringify(req)} gives BadRequestError`, e.error);
    }
  }
  for (const [req, param] of [[{ logprobs: true, top_logprobs: 21 }, 'top_logprobs'],
                              [{ top_logprobs: 2 }, 'top_logprobs'], [{ logprobs: 5 }, 'logprobs']]) {
    try {
      await client.chat.completions.create({ model, messages: msgs, max_tokens: 2, ...req });
      check(false, `chat ${JSON.stringify(req)} is rejected`);
    } catch (e) {
      check(e instanceof OpenAI.BadRequestError && e.status === 400 && e.param === param && e.error.message,
            `chat ${JSON.stringify(req)} gives BadRequestError`, e.error);
    }
  }
  try {
    await client.completions.create({ model, prompt, n: 2 });
    check(false, 'n = 2 is rejected');
  } catch (e) {
    check(e instanceof OpenAI.BadRequestError && e.param === 'n', 'n = 2 gives BadRequestError', e.error);
  }
  const bad = new OpenAI({ baseURL: env('STRATA_URL') + '/v1', apiKey: 'wrong-key', maxRetries: 0 });
  try {
    await bad.models.list();
    check(false, 'a wrong key is rejected');
  } catch (e) {
    check(e instanceof OpenAI.AuthenticationError, 'a wrong key gives AuthenticationError', e.error);
  }
  console.log(`all ${checks} checks passed`);
}

// logprobs, greedy: every chosen token is its position's most likely, values <= 0, N alternatives
// sorted; the first position's values equal the log-softmax of `strata logits`; streamed equals
// whole.
async function checkLogprobs(model, prompt, msgs, ref) {
  const K = 5;
  const c = await client.completions.create({ model, prompt, max_tokens: N, temperature: 0, logprobs: K });
  const lp = c.choices[0].logprobs;
  const n = c.usage.completion_tokens;
  check(lp && lp.tokens.length === n && lp.token_logprobs.length === n && lp.top_logprobs.length === n &&
        lp.text_offset.length === n, 'completions logprobs: one entry per generated token', lp);
  check(lp.tokens.join('') === c.choices[0].text, 'completions logprobs: the tokens spell the text',
        { tokens: lp.tokens, text: c.choices[0].text });
  check(lp.text_offset.every((o, i) => o === [...lp.tokens.slice(0, i).join('')].length),
        'completions logprobs: text_offset counts the characters before each token', lp.text_offset);
  lp.top_logprobs.forEach((top, i) => {
    const values = Object.values(top);
    check(values.length === K && values.every((v) => v <= 0) && lp.token_logprobs[i] <= 0,
          `completions logprobs ${i}: ${K} alternatives, values <= 0`, top);
    check(lp.token_logprobs[i] === Math.max(...values) && top[lp.tokens[i]] === lp.token_logprobs[i],
          `completions logprobs ${i}: the greedy token is the top entry`, { token: lp.tokens[i], top });
  });
  const refTop = [...ref].sort((a, b) => b - a).slice(0, K);
  const got = Object.values(lp.top_logprobs[0]).sort((a, b) => b - a);
  check(close(lp.token_logprobs[0], refTop[0]) && got.every((v, i) => close(v, refTop[i])),
        'completions logprobs agree with the log-softmax of strata logits', { got, want: refTop });

  const chunks = [];
  for await (const chunk of await client.completions.create(
      { model, prompt, max_tokens: N, temperature: 0, logprobs: K, stream: true })) {
    const l = chunk.choices[0] && chunk.choices[0].logprobs;
    if (l) chunks.push(l);
  }
  const joined = (k) => chunks.flatMap((l) => l[k]);
  check(JSON.stringify(['tokens', 'token_logprobs', 'top_logprobs', 'text_offset'].map(joined)) ===
        JSON.stringify([lp.tokens, lp.token_logprobs, lp.top_logprobs, lp.text_offset]),
        'streamed completions logprobs equal the whole response\'s', chunks);

  const T = 3;
  const ch = await client.chat.completions.create(
      { model, messages: msgs, max_tokens: N, temperature: 0, logprobs: true, top_logprobs: T });
  const content = ch.choices[0].logprobs && ch.choices[0].logprobs.content;
  check(content && content.length === ch.usage.completion_tokens &&
        content.map((e) => e.token).join('') === ch.choices[0].message.content,
        'chat logprobs: one entry per generated token, spelling the text', ch.choices[0]);
  content.forEach((e, i) => {
    const values = e.top_logprobs.map((t) => t.logprob);
    check(e.top_logprobs.length === T && descending(values) && e.logprob <= 0 && values.every((v) => v <= 0),
          `chat logprobs ${i}: ${T} alternatives sorted, values <= 0`, e);
    check(e.top_logprobs[0].token === e.token && e.top_logprobs[0].logprob === e.logprob &&
          Buffer.from(e.bytes).toString('utf8') === e.token, `chat logprobs ${i}: the greedy token is the top entry`, e);
  });
  const streamed = [];
  for await (const chunk of await client.chat.completions.create(
      { model, messages: msgs, max_tokens: N, temperature: 0, logprobs: true, top_logprobs: T, stream: true })) {
    const l = chunk.choices[0] && chunk.choices[0].logprobs;
    if (l) streamed.push(...l.content);
  }
  check(JSON.stringify(streamed) === JSON.stringify(content), 'streamed chat logprobs equal the whole response\'s',
        streamed);
  const plain = await client.chat.completions.create({ model, messages: msgs, max_tokens: 2, temperature: 0 });
  check(plain.choices[0].logprobs === null, 'no logprobs unless asked', plain.choices[0]);
}

main().catch((e) => {
  console.error('FAIL:', e);
  process.exit(1);
});
