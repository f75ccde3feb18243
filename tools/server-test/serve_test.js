// Drives a running `strata serve` with the official OpenAI client, as users' scripts do, and
// checks what they rely on: completions and chat, streamed and not, greedy output equal to
// `strata generate --temp 0` for the same prompt, usage, stop strings, and 16 concurrent streams
// that all complete with the right text. tests/server/test_serve.cpp starts the server and runs this.
//   STRATA_URL=http://127.0.0.1:PORT STRATA_BIN=build/strata STRATA_MODEL=models/m.gguf \
//     STRATA_API_KEY=KEY node serve_test.js
// Prints one line per check; exits 1 at the first failure (with the reason), 0 when all passed.
'use strict';
const { execFileSync } = require('node:child_process');
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

  // Errors arrive as the client's typed exceptions.
  try {
    await client.completions.create({ model, prompt, max_tokens: 'many' });
    check(false, 'wrong type is rejected');
  } catch (e) {
    check(e instanceof OpenAI.BadRequestError && e.param === 'max_tokens', 'wrong type gives BadRequestError', e.error);
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

main().catch((e) => {
  console.error('FAIL:', e);
  process.exit(1);
});
