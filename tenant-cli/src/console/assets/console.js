// The sandbox's rep console: picks an agent, gets a session token from the console's own
// backend (which holds the API key), runs the practice call through the service's browser SDK,
// then shows the score. Every SDK event is listed with its payload under "SDK events".

const baseUrl = document.querySelector('meta[name="svc-base-url"]').content;
const $ = (id) => document.getElementById(id);

const ui = {
  agent: $('agent'),
  drill: $('drill'),
  difficulty: $('difficulty'),
  state: $('state'),
  start: $('start'),
  callState: $('call-state'),
  persona: $('persona'),
  transcript: $('transcript'),
  sayForm: $('say-form'),
  sayText: $('say-text'),
  say: $('say'),
  hangup: $('hangup'),
  scoreState: $('score-state'),
  score: $('score'),
  events: $('events'),
  reuse: $('reuse-token'),
};

let agents = [];
let call = null;
let lastToken = null;
let scoring = null;

$('api-base').textContent = baseUrl;
$('error-close').addEventListener('click', hideError);

function showError(code, message) {
  $('error-code').textContent = code;
  $('error-message').textContent = message;
  $('error').hidden = false;
}

function hideError() {
  $('error').hidden = true;
}

function setCallState(state) {
  ui.callState.textContent = state;
  ui.callState.dataset.state = state;
  const live = state === 'live';
  ui.sayText.disabled = !live;
  ui.say.disabled = !live;
  ui.hangup.disabled = !(live || state === 'connecting');
  ui.start.disabled = agents.length === 0 || state === 'connecting' || state === 'live' || state === 'ending';
  ui.reuse.disabled = lastToken === null || state === 'connecting' || state === 'live';
}

function addLine(list, who, text) {
  const item = document.createElement('li');
  item.className = who;
  const label = document.createElement('span');
  label.className = 'who';
  label.textContent = who === 'rep' ? 'You' : who === 'persona' ? ui.persona.dataset.name || 'Persona' : who;
  const body = document.createElement('span');
  body.className = 'text';
  body.textContent = text;
  item.append(label, body);
  list.append(item);
  list.scrollTop = list.scrollHeight;
}

function logEvent(name, payload) {
  const item = document.createElement('li');
  item.dataset.event = name;
  item.dataset.payload = JSON.stringify(payload);
  const time = document.createElement('time');
  time.textContent = new Date().toLocaleTimeString();
  const label = document.createElement('code');
  label.className = `event ${name}`;
  label.textContent = name;
  const body = document.createElement('pre');
  body.textContent = JSON.stringify(payload);
  item.append(time, label, body);
  ui.events.append(item);
  ui.events.scrollTop = ui.events.scrollHeight;
}

async function readError(response) {
  try {
    const body = await response.json();
    if (body && body.error) return [body.error.code, body.error.message];
  } catch {
    // not JSON: fall through
  }
  return [`HTTP_${response.status}`, `the console answered HTTP ${response.status}`];
}

async function loadAgents() {
  let response;
  try {
    response = await fetch('/console/api/agents', { cache: 'no-store' });
  } catch (error) {
    showError('CONSOLE_UNREACHABLE', `the console's backend did not answer: ${error.message}`);
    return;
  }
  if (!response.ok) {
    showError(...(await readError(response)));
    return;
  }
  const list = await response.json();
  agents = list.agents;
  ui.agent.replaceChildren();
  if (agents.length === 0) {
    const none = document.createElement('option');
    none.textContent = 'No agents yet: start the sandbox with --roster <csv>';
    ui.agent.append(none);
  }
  agents.forEach((agent, index) => {
    const option = document.createElement('option');
    option.value = String(index);
    option.textContent = `${agent.name || agent.agentId} (${agent.platformAgentId || agent.agentId})`;
    ui.agent.append(option);
  });
  ui.agent.disabled = agents.length === 0;
  setCallState(ui.callState.dataset.state);
}

function connectOptions() {
  const options = { drillKey: ui.drill.value };
  if (ui.difficulty.value) options.difficulty = ui.difficulty.value;
  const state = ui.state.value.trim().toUpperCase();
  if (state) options.filters = { state };
  return options;
}

/** A new SvcCall with every handler registered (before connect(), as the contract requires). */
function newCall(SvcCall, { main }) {
  const next = new SvcCall({ baseUrl });
  next.on('ready', (payload) => {
    logEvent('ready', payload);
    if (!main) return;
    ui.persona.dataset.name = payload.persona.name;
    ui.persona.textContent = `On the line: ${payload.persona.name}`;
    setCallState('live');
    ui.sayText.focus();
  });
  next.on('message', (payload) => {
    logEvent('message', payload);
    if (main) addLine(ui.transcript, 'persona', payload.text);
  });
  next.on('ended', (payload) => {
    logEvent('ended', payload);
    if (!main) return;
    setCallState('ended');
    ui.persona.textContent = `Call ended after ${payload.durationSec} s.`;
    waitForScore(payload.callId, payload.durationSec);
  });
  next.on('error', (payload) => {
    logEvent('error', payload);
    showError(payload.code, payload.message);
    if (main && (next.state === 'failed' || next.state === 'connecting')) setCallState('failed');
  });
  return next;
}

async function startCall(SvcCall) {
  hideError();
  const agent = agents[Number(ui.agent.value)];
  if (!agent) return;
  setCallState('connecting');
  ui.transcript.replaceChildren();
  ui.persona.textContent = 'Connecting…';
  delete ui.persona.dataset.name;
  let response;
  try {
    response = await fetch('/console/api/token', {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify(agent.platformAgentId ? { platformAgentId: agent.platformAgentId } : { agentId: agent.agentId }),
    });
  } catch (error) {
    showError('CONSOLE_UNREACHABLE', `the console's backend did not answer: ${error.message}`);
    setCallState('failed');
    return;
  }
  if (!response.ok) {
    showError(...(await readError(response)));
    setCallState('failed');
    return;
  }
  const { token } = await response.json();
  lastToken = token;
  call = newCall(SvcCall, { main: true });
  const ready = await call.connect(token, connectOptions());
  if (ready === null) {
    ui.persona.textContent = 'The call did not start.';
    setCallState('failed');
  }
}

async function redeemAgain(SvcCall) {
  if (lastToken === null) return;
  hideError();
  const replay = newCall(SvcCall, { main: false });
  await replay.connect(lastToken, connectOptions());
}

function percent(value) {
  return typeof value === 'number' ? `${Math.round(value)} %` : 'not assessed';
}

function showScore(detail, durationSec) {
  const score = detail.score || {};
  $('overall').textContent = typeof score.overallScore === 'number' ? String(Math.round(score.overallScore)) : '–';
  $('compliance').textContent = percent(score.compliancePercent);
  $('duration').textContent = `${detail.durationSec ?? durationSec} s`;
  $('call-id').textContent = detail.id;
  $('summary').textContent = score.summary || '';
  $('feedback').textContent = score.feedback || '';
  const scored = $('scored-transcript');
  scored.replaceChildren();
  for (const turn of detail.transcript || []) {
    addLine(scored, turn.role === 'agent' ? 'rep' : 'persona', String(turn.content ?? turn.text ?? ''));
  }
  ui.scoreState.textContent = 'Scored.';
  ui.scoreState.dataset.state = 'scored';
  ui.score.hidden = false;
}

async function waitForScore(callId, durationSec) {
  const mine = {};
  scoring = mine;
  ui.score.hidden = true;
  ui.scoreState.textContent = 'Scoring…';
  ui.scoreState.dataset.state = 'scoring';
  const deadline = Date.now() + 120000;
  while (scoring === mine && Date.now() < deadline) {
    try {
      const response = await fetch(`/console/api/calls/${encodeURIComponent(callId)}`, { cache: 'no-store' });
      if (response.ok) {
        const view = await response.json();
        if (view.state === 'scored' && view.call) {
          showScore(view.call, durationSec);
          return;
        }
        if (view.state === 'not_scored') {
          ui.scoreState.textContent =
            'Not scored: the rep never spoke or the call did not complete (the call.scored webhook says SCORING_INCOMPLETE).';
          ui.scoreState.dataset.state = 'not_scored';
          return;
        }
      } else if (response.status !== 404) {
        showError(...(await readError(response)));
        return;
      }
    } catch (error) {
      showError('CONSOLE_UNREACHABLE', `the console's backend did not answer: ${error.message}`);
      return;
    }
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
  if (scoring === mine) ui.scoreState.textContent = 'No score after two minutes.';
}

async function main() {
  let SvcCall;
  try {
    ({ SvcCall } = await import(new URL('/sdk/v1/svc-sdk.js', baseUrl).href));
  } catch (error) {
    showError('SDK_NOT_LOADED', `the SDK could not be loaded from ${baseUrl}: ${error.message}`);
    return;
  }
  ui.start.addEventListener('click', () => startCall(SvcCall));
  ui.reuse.addEventListener('click', () => redeemAgain(SvcCall));
  ui.sayForm.addEventListener('submit', (event) => {
    event.preventDefault();
    const text = ui.sayText.value.trim();
    if (!text || !call || call.state !== 'live') return;
    call.say(text);
    addLine(ui.transcript, 'rep', text);
    ui.sayText.value = '';
  });
  ui.hangup.addEventListener('click', async () => {
    if (!call) return;
    ui.hangup.disabled = true;
    setCallState('ending');
    await call.disconnect();
  });
  await loadAgents();
  document.body.dataset.ready = 'true';
}

main();
