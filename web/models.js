// models.js — Models: the list and Register Model (runtime: command, env,
// health and predict paths, start-up timeout; resources: GPU count, GPU
// memory and compute share, CPU, memory; size and dtype), with the
// recommendations API's GPU estimate for the model's size beside the form.
import { api, listAll, enc } from './api.js';
import { h, replace, field, table, showError, clearErrors, fmt, num } from './dom.js';

const DTYPES = ['fp16', 'bf16', 'fp32', 'fp8', 'int8', 'int4'];

function input(name, attrs = {}) { return h('input', { name, autocomplete: 'off', ...attrs }); }

// KEY=VALUE lines -> object (lines without '=' are left to the API to refuse).
function envOf(text) {
  const env = {};
  for (const line of text.split('\n').map((l) => l.trim()).filter(Boolean)) {
    const i = line.indexOf('=');
    env[i < 0 ? line : line.slice(0, i)] = i < 0 ? '' : line.slice(i + 1);
  }
  return env;
}

function recommendPanel(onUse) {
  const box = h('aside', { class: 'card recommend', id: 'recommend', 'aria-live': 'polite' },
    h('h2', {}, 'GPU recommendation'), h('p', { class: 'muted' }, 'Enter the model size (billions of parameters) to see which GPUs fit it.'));
  let seq = 0;
  async function update(paramsB, dtype) {
    const mine = ++seq;
    if (!(paramsB > 0)) return;
    let r;
    try {
      r = await api('GET', `/v1/recommendations?params_b=${enc(paramsB)}&dtype=${enc(dtype)}&limit=6`);
    } catch (e) {
      if (mine === seq) replace(box, h('h2', {}, 'GPU recommendation'), h('p', { class: 'form-err' }, e.message));
      return;
    }
    if (mine !== seq) return;
    const est = r.estimate;
    replace(box, h('h2', {}, 'GPU recommendation'),
      h('p', {}, `About `, h('b', { id: 'rec-total' }, fmt.mib(est.total_mib)), ` of GPU memory for ${paramsB} B parameters in ${dtype}.`),
      h('details', {}, h('summary', {}, 'How this is estimated'), h('p', { class: 'small' }, est.formula)),
      h('button', { type: 'button', onclick: () => onUse(est.total_mib) }, `Use ${est.total_mib} MiB as the GPU memory`),
      table([
        { label: 'Instance type', value: (o) => `${o.instance_type} (${o.provider})` },
        { label: 'GPU', value: (o) => `${o.gpus_used}× ${o.gpu_type} ${fmt.mib(o.gpu_memory_mib)}` },
        { label: 'Fit', value: (o) => o.fit === 'whole_gpu' ? `${Math.round(o.share_of_gpu * 100)}% of a GPU` : o.fit },
        { label: 'Price / h', value: (o) => fmt.money(o.price_per_hour) },
      ], r.options || [], { empty: 'No instance type in the catalog fits it.', cls: 'small' }));
  }
  return { el: box, update };
}

function registerForm(ctx) {
  const id = input('id', { required: true, placeholder: 'e.g. llama-8b' });
  const desc = input('description');
  const cmd = h('textarea', { name: 'command', rows: '3', spellcheck: 'false', placeholder: 'drover-demo-model\n--weights-mib\n2' });
  const env = h('textarea', { name: 'env', rows: '2', spellcheck: 'false', placeholder: 'KEY=value' });
  const health = input('health_path', { value: '/health' });
  const predict = input('predict_path', { value: '/predict' });
  const startup = input('startup_timeout_seconds', { type: 'number', min: '1', value: '600' });
  const gpuCount = input('gpu_count', { type: 'number', min: '0', max: '16', value: '1' });
  const gpuMem = input('gpu_memory_mib', { type: 'number', min: '0', value: '' });
  const gpuPct = input('gpu_compute_percent', { type: 'number', min: '1', max: '100', value: '100' });
  const cpu = input('cpu_millis', { type: 'number', min: '0', value: '1000' });
  const mem = input('memory_mib', { type: 'number', min: '0', value: '1024' });
  const params = input('params_b', { type: 'number', min: '0', step: 'any', placeholder: 'e.g. 8' });
  const dtype = h('select', { name: 'dtype' }, DTYPES.map((d) => h('option', { value: d }, d)));
  const rec = recommendPanel((mib) => { gpuMem.value = String(mib); gpuMem.focus(); });
  const again = () => rec.update(Number(params.value), dtype.value);
  params.addEventListener('input', again);
  dtype.addEventListener('change', again);
  const form = h('form', { class: 'card', id: 'new-model', novalidate: true },
    h('h2', {}, 'Register model'),
    field('Model id', id, { name: 'id' }),
    field('Description', desc, { name: 'description' }),
    h('div', { class: 'row' },
      field('Size (billions of parameters)', params, { name: 'params_b', tip: 'Optional. Used for the GPU recommendation beside this form and kept with the model.' }),
      field('Weights dtype', dtype, { name: 'dtype' })),
    h('fieldset', {}, h('legend', {}, 'Runtime'),
      field('Command (one argument per line)', cmd, { name: 'runtime.command', tip: 'The model server the agent starts for each replica; it must answer the health path and the predict path on $PORT.' }),
      field('Environment (KEY=value per line)', env, { name: 'runtime.env' }),
      h('div', { class: 'row' },
        field('Health path', health, { name: 'runtime.health_path' }),
        field('Predict path', predict, { name: 'runtime.predict_path' }),
        field('Start-up timeout (s)', startup, { name: 'runtime.startup_timeout_seconds', tip: 'A replica not healthy by then is restarted.' }))),
    h('fieldset', {}, h('legend', {}, 'Resources per replica'),
      h('div', { class: 'row' },
        field('GPUs', gpuCount, { name: 'resources.gpu.count', tip: '0: CPU only. 1 with a memory below the GPU’s: a share of one GPU (several replicas per GPU). 2 or more: whole GPUs on one node.' }),
        field('GPU memory (MiB)', gpuMem, { name: 'resources.gpu.memory_mib', tip: 'Memory of the GPU share; empty or 0 asks for a whole GPU. The recommendation beside this form estimates it from the model size.' }),
        field('GPU compute (%)', gpuPct, { name: 'resources.gpu.compute_percent', tip: 'Share of the GPU’s compute (MPS where it runs, time-slicing otherwise).' })),
      h('div', { class: 'row' },
        field('CPU (millicores)', cpu, { name: 'resources.cpu_millis' }),
        field('Memory (MiB)', mem, { name: 'resources.memory_mib' }))),
    h('p', { class: 'form-err', role: 'alert' }),
    h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary' }, 'Register model')));
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    clearErrors(form);
    const gpu = { count: num(gpuCount.value), compute_percent: num(gpuPct.value) };
    if (gpuMem.value !== '') gpu.memory_mib = num(gpuMem.value);
    const body = {
      id: id.value.trim(), description: desc.value,
      runtime: { command: cmd.value.split('\n').map((s) => s.trim()).filter(Boolean), env: envOf(env.value),
        health_path: health.value, predict_path: predict.value, startup_timeout_seconds: num(startup.value) },
      resources: { gpu, cpu_millis: num(cpu.value), memory_mib: num(mem.value) },
    };
    if (params.value !== '') { body.params_b = num(params.value); body.dtype = dtype.value; }
    try {
      await api('POST', '/v1/models', body);
      form.reset();
      clearErrors(form);
      ctx.refreshNow();
    } catch (e) {
      showError(form, e);
    }
  });
  return h('div', { class: 'with-aside' }, form, rec.el);
}

export async function modelsPage(ctx) {
  const list = h('div', { id: 'models' });
  let form = null;
  const el = h('section', {});
  const page = { el };
  ctx.refreshNow = () => page.refresh();
  const toggle = ctx.canWrite ? h('button', { type: 'button', class: 'primary', id: 'new-model-btn', onclick: () => {
    if (form) { form.remove(); form = null; return; }
    form = registerForm(ctx);
    list.before(form);
    form.querySelector('input').focus();
  } }, 'Register model') : null;
  el.append(h('div', { class: 'head' }, h('h1', {}, 'Models'), toggle), list);
  page.refresh = async () => {
    const models = await listAll('/v1/models');
    replace(list, table([
      { label: 'Model', value: (m) => m.id },
      { label: 'Command', value: (m) => h('code', {}, m.runtime.command.join(' ')) },
      { label: 'GPU', value: (m) => {
        const g = m.resources.gpu || {};
        return !g.count ? 'CPU only' : g.count > 1 ? `${g.count} whole GPUs`
          : g.memory_mib ? `share: ${fmt.mib(g.memory_mib)}, ${g.compute_percent}%` : '1 whole GPU';
      } },
      { label: 'CPU / memory', value: (m) => `${m.resources.cpu_millis}m / ${fmt.mib(m.resources.memory_mib)}` },
      { label: 'Size', value: (m) => (m.params_b ? `${m.params_b} B ${m.dtype || ''}` : '—') },
    ], models, { empty: 'No models registered yet.' }));
  };
  return page;
}
