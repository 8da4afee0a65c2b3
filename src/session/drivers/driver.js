// hexr-sandbox's session driver for JavaScript: run by driver.py as
//   node driver.js <command fd> <answer fd>
// It reads {"op":"exec","code":...} lines on the command fd and answers one line per
// cell on the answer fd: {"ev":"done","status":"ok"|"exception","value":..,"exception":..}.
// Its fds 1 and 2 are driver.py's pipes (stdout/stderr events), its stdin /dev/null.
//
// Cells run with vm.runInThisContext, so global let/const/class/function bindings stay
// (scripts of one context share their global lexical scope) and the completion value of
// the cell is its value (util.inspect for text/plain). A cell with a top-level await
// that does not compile as a script runs wrapped in an async function: its top-level
// let/const/var of the form `let x = ...` become assignments to globals, so they stay
// too, and its last line, when an expression, is its value. SIGINT stops a synchronous
// cell (breakOnSigint) and ends the wait for an asynchronous one.
'use strict';
const fs = require('fs');
const util = require('util');
const vm = require('vm');

// require() as in the REPL: modules resolved from the working directory (and NODE_PATH)
globalThis.require = require('module').createRequire(require('path').join(process.cwd(), '<cell>'));

const ctlFd = Number(process.argv[2]);
const ansFd = Number(process.argv[3]);
let cell = 0;
let waiting = null; // the running async cell's reject, for an interrupt

function answer(obj) {
  const line = JSON.stringify(obj) + '\n';
  const buf = Buffer.from(line, 'utf8');
  for (let off = 0; off < buf.length;) off += fs.writeSync(ansFd, buf, off);
}

function bundle(v) {
  if (v === undefined) return null;
  let text;
  try {
    text = util.inspect(v, { depth: 4, maxArrayLength: 200, maxStringLength: 100000 });
  } catch (e) {
    text = '<inspect failed: ' + e + '>';
  }
  const data = { 'text/plain': text };
  if (v !== null && typeof v === 'object' && !(v instanceof Promise)) {
    try {
      const j = JSON.stringify(v);
      if (j !== undefined && j.length <= 1 << 20) data['application/json'] = JSON.parse(j);
    } catch (e) { /* not JSON: text/plain only */ }
  }
  return data;
}

function exceptionOf(e) {
  if (e instanceof Error || (e && typeof e === 'object' && 'stack' in e)) {
    const stack = String(e.stack || e);
    // the driver's own frames are not the cell's
    // the driver's frames and node's below the last frame of a cell are not the cell's
    let lines = stack.split('\n').filter((l) => !l.includes(__filename));
    let lastCell = -1;
    lines.forEach((l, i) => { if (/^\s+at .*\bcell-\d+:/.test(l)) lastCell = i; });
    if (lastCell >= 0) lines = lines.slice(0, lastCell + 1);
    return { type: String(e.name || (e.constructor && e.constructor.name) || 'Error'),
             message: String(e.message === undefined ? '' : e.message), traceback: lines.join('\n') };
  }
  let msg;
  try { msg = String(e); } catch (x) { msg = typeof e; }
  return { type: 'Uncaught', message: msg, traceback: 'Uncaught ' + msg };
}

const DECL = /^(\s{0,0})(?:let|const|var)\s+([A-Za-z_$][\w$]*)\s*=/;
const STMT = /^\s*(?:let|const|var|function|class|if|for|while|do|switch|try|return|throw|import|export|break|continue|\}|\{|\/\/|\/\*)/;

// A cell with a top-level await, as an async function whose result is the cell's value.
function wrapAsync(code) {
  const lines = code.split('\n').map((l) => {
    const m = DECL.exec(l);
    return m ? l.slice(0, m[0].length).replace(/^(?:let|const|var)\s+/, '') + l.slice(m[0].length) : l;
  });
  let last = lines.length - 1;
  while (last >= 0 && lines[last].trim() === '') last--;
  if (last >= 0) {
    // the last line as the value, or what follows its last ';' ("x = await f(); x * 2")
    const line = lines[last].replace(/;\s*$/, '');
    const semi = line.lastIndexOf(';');
    const tries = [['', line]];
    if (semi >= 0) tries.push([line.slice(0, semi + 1) + ' ', line.slice(semi + 1)]);
    for (const [head, expr] of tries) {
      if (STMT.test(expr) || /[{,(]\s*$/.test(expr) || expr.trim() === '') continue;
      const withReturn = lines.slice();
      withReturn[last] = head + 'return (' + expr + ');';
      const src = '(async () => {\n' + withReturn.join('\n') + '\n})()';
      try {
        new vm.Script(src);
        return src;
      } catch (e) { /* not an expression on its own */ }
    }
  }
  return '(async () => {\n' + lines.join('\n') + '\n})()';
}

function compile(code, name) {
  try {
    return [new vm.Script(code, { filename: name }), false];
  } catch (e) {
    if (!(e instanceof SyntaxError) || !/\bawait\b/.test(code)) throw e;
    return [new vm.Script(wrapAsync(code), { filename: name, lineOffset: -1 }), true];
  }
}

async function run(code) {
  cell++;
  const name = 'cell-' + cell;
  let value;
  try {
    const [script, wrapped] = compile(code, name);
    value = script.runInThisContext({ breakOnSigint: true, displayErrors: false });
    if (wrapped) {
      value = await new Promise((resolve, reject) => {
        waiting = reject;
        value.then(resolve, reject);
      });
    }
    return { ev: 'done', status: 'ok', value: bundle(value), exception: null };
  } catch (e) {
    return { ev: 'done', status: 'exception', value: null, exception: exceptionOf(e) };
  } finally {
    waiting = null;
  }
}

// Between cells (and in an async cell's wait) SIGINT must not end node.
process.on('SIGINT', () => {
  if (waiting) {
    const e = new Error('Script execution interrupted.');
    e.name = 'Interrupted';
    waiting(e);
  }
});
// What a cell left running may fail later: say so, go on.
process.on('uncaughtException', (e) => {
  process.stderr.write('Uncaught ' + (e && e.stack ? e.stack : String(e)) + '\n');
});
process.on('unhandledRejection', (e) => {
  process.stderr.write('Unhandled rejection: ' + (e && e.stack ? e.stack : String(e)) + '\n');
});

// What the cell wrote is in the pipes before its answer: a write to a full pipe is
// queued by node, and an empty write's callback runs once all before it went out.
function flushed() {
  return Promise.all([process.stdout, process.stderr].map((s) => new Promise((resolve) => {
    if (s.destroyed || !s.writable) return resolve();
    s.write('', () => resolve());
  })));
}

answer({ ev: 'ready', version: process.versions.node });

const queue = [];
let busy = false;
async function pump() {
  if (busy) return;
  busy = true;
  while (queue.length) {
    const cmd = queue.shift();
    const res = await run(String(cmd.code));
    await flushed();
    answer(res);
  }
  busy = false;
}

let pending = '';
const input = fs.createReadStream(null, { fd: ctlFd, encoding: 'utf8' });
input.on('data', (chunk) => {
  pending += chunk;
  let nl;
  while ((nl = pending.indexOf('\n')) >= 0) {
    const line = pending.slice(0, nl);
    pending = pending.slice(nl + 1);
    let cmd;
    try { cmd = JSON.parse(line); } catch (e) { continue; }
    if (cmd && cmd.op === 'exec') queue.push(cmd);
  }
  pump();
});
input.on('end', () => process.exit(0));
