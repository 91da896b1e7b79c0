// Code mode's prelude: runs once in each fresh context before the script, and returns the
// functions through which the host settles tool calls and reads the script's value. What it keeps lives in this closure;
// the script reaches only what it puts on globalThis.
//
// It is not the security boundary (the engine has no file system, network, clock timers or
// module loader to begin with, and the host functions check everything they are given); it
// takes away what turns text into code and what could block or time, and builds `tools` and
// `console`.
(function (hostCall, hostSearch, searchOffered, hostLog, manifest, startedAt, bounds) {
  'use strict';
  const { logLimit, maxArrayLength, overTime } = bounds;
  const G = globalThis;
  const { defineProperty, freeze, create, getPrototypeOf } = Object;
  const PromiseCtor = Promise;
  const ErrorCtor = Error;
  const MapCtor = Map;
  const stringify = JSON.stringify;
  const StringCtor = String;
  const construct = Reflect.construct;

  // No code from strings: no eval, no Function constructor of any kind of function.
  const refused = function Function() {
    throw new EvalError('code generation from strings is not available in code mode');
  };
  defineProperty(refused, 'prototype', { value: Function.prototype, writable: false });
  for (const proto of [
    Function.prototype,
    getPrototypeOf(async function () {}),
    getPrototypeOf(function* () {}),
    getPrototypeOf(async function* () {}),
  ]) {
    defineProperty(proto, 'constructor', { value: refused, writable: false, enumerable: false, configurable: false });
  }
  defineProperty(G, 'Function', { value: refused, writable: true, enumerable: false, configurable: true });
  delete G.eval;
  // Atomics.wait blocks the thread without using CPU time; shared memory has no use here.
  delete G.Atomics;
  delete G.SharedArrayBuffer;

  // The engine stops a script between instructions; some of its array builtins (sort,
  // reverse, copyWithin, shift, forEach over holes, ...) loop over `length` in native code
  // without ever stopping, and `length` costs nothing to set (`a.length = 2 ** 32 - 1`: a sort
  // ran for minutes, deaf to the CPU limit and to cancellation). Every array method refuses
  // a length no array of the script's heap can really hold: denser than that is over the
  // memory limit anyway.
  // What the guard reads must be what the builtin reads: a `length` behind a getter (or a
  // proxy, or an object with `valueOf`) could say 0 to the guard and 2 ** 53 - 1 to the
  // builtin, so an array-like's `length` must be a plain number held as data. `concat` and
  // `flat` also read the lengths of their arguments and of nested arrays: those are counted
  // first, in script code the CPU limit stops.
  const MAX_LENGTH = maxArrayLength;
  const RangeErrorCtor = RangeError;
  const apply = Reflect.apply;
  const isArray = Array.isArray;
  const isView = ArrayBuffer.isView;
  const NumberCtor = Number;
  const ObjectCtor = Object;
  const getOwnDescriptor = Object.getOwnPropertyDescriptor;
  const protoOf = Object.getPrototypeOf;
  delete G.Proxy;
  const arrayProto = Array.prototype;
  const refuse = (name, why) => {
    throw new RangeErrorCtor('Array.prototype.' + name + ' on ' + why + ' in code mode');
  };
  const lengthOf = (name, o) => {
    if (o === null || o === undefined) {
      return 0;
    }
    if (!isArray(o) && !isView(o)) {
      for (let at = ObjectCtor(o); at !== null; at = protoOf(at)) {
        const d = getOwnDescriptor(at, 'length');
        if (d !== undefined) {
          if (!('value' in d) || (typeof d.value !== 'number' && d.value !== undefined)) {
            refuse(name, 'a length that is not a plain number');
          }
          break;
        }
      }
    }
    const length = NumberCtor(o.length);
    if (length > MAX_LENGTH) {
      refuse(name, 'a length of ' + length + ': at most ' + MAX_LENGTH);
    }
    return length > 0 ? length : 0;
  };
  // What `flat` to `depth` (or `concat`) would make of `items`: refused past MAX_LENGTH.
  // By index, with the builtins kept here: what the script can replace is not asked.
  const flattened = (name, items, depth, total) => {
    for (let i = 0; i < items.length; i++) {
      const item = items[i];
      if (isArray(item) && depth > 0) {
        total = flattened(name, lengthOf(name, item) > 0 ? apply(originals.slice, item, []) : [], depth - 1, total);
      } else {
        total += 1;
      }
      if (total > MAX_LENGTH) {
        refuse(name, 'more than ' + MAX_LENGTH + ' elements');
      }
    }
    return total;
  };
  const originals = {};
  const guards = {};
  for (const name of Object.getOwnPropertyNames(arrayProto)) {
    const described = getOwnDescriptor(arrayProto, name);
    const original = described.value;
    if (typeof original !== 'function' || name === 'constructor') {
      continue;
    }
    originals[name] = original;
    const guarded = {
      [name](...args) {
        lengthOf(name, this);
        if (name === 'concat') {
          let total = lengthOf(name, this);
          for (let i = 0; i < args.length; i++) {
            // Any object counted as spread: whether it is can be asked twice and answered
            // differently.
            const arg = args[i];
            total += arg !== null && typeof arg === 'object' ? lengthOf(name, arg) + 1 : 1;
            if (total > MAX_LENGTH) {
              refuse(name, 'more than ' + MAX_LENGTH + ' elements');
            }
          }
        } else if (name === 'flat') {
          const depth = args[0] === undefined ? 1 : NumberCtor(args[0]);
          flattened(name, apply(originals.slice, this, []), depth > MAX_LENGTH ? MAX_LENGTH : depth, 0);
        } else if (name === 'flatMap') {
          // `map`, then `flat` one level: each piece counted as `flat` counts it.
          return apply(guards.flat, apply(guards.map, this, args), [1]);
        }
        return apply(original, this, args);
      },
    }[name];
    guards[name] = guarded;
    defineProperty(arrayProto, name, { ...described, value: guarded });
  }

  // The engine's string search compares the pattern at each position in native code, which
  // the CPU limit cannot stop: `'a'.repeat(6e4).indexOf('a'.repeat(3e4) + 'b')` ran 20 s
  // (texts the heap can hold would take days). A search that could cost more than
  // SEARCH_COST comparisons runs here instead, in native steps of that cost the limit stops
  // between. Arguments are converted once, in the order the builtins convert them, and the
  // builtins are then given the converted values, so nothing the script sees changes.
  const stringProto = String.prototype;
  const TypeErrorCtor = TypeError;
  const matchSymbol = Symbol.match;
  const replaceSymbol = Symbol.replace;
  const splitSymbol = Symbol.split;
  const RegExpCtor = RegExp;
  const strings = {};
  for (const name of ['indexOf', 'lastIndexOf', 'includes', 'slice', 'split', 'replace', 'replaceAll', 'normalize', 'localeCompare']) {
    strings[name] = stringProto[name];
  }
  const SEARCH_COST = 1 << 20;
  const MathCtor = Math;
  const costly = (text, pattern) => {
    const m = pattern.length;
    return m > 1 && m <= text.length && (text.length - m + 1) * m > SEARCH_COST;
  };
  // ToString, as the builtins do it (a symbol throws).
  const toText = (value) => {
    if (typeof value === 'symbol') {
      throw new TypeErrorCtor('Cannot convert a Symbol value to a string');
    }
    return StringCtor(value);
  };
  // `this` as text: null and undefined throw as the builtin throws.
  const thisText = (name, that) => (that === null || that === undefined ? apply(strings[name], that, []) : toText(that));
  // ToIntegerOrInfinity of an already converted number.
  const integer = (n) => (n !== n ? 0 : n < 0 ? -MathCtor.floor(-n) : MathCtor.floor(n));
  const clamp = (n, low, high) => (n < low ? low : n > high ? high : n);
  const isRegExp = (value) => {
    if (value === null || (typeof value !== 'object' && typeof value !== 'function')) {
      return false;
    }
    const matcher = value[matchSymbol];
    return matcher !== undefined ? !!matcher : value instanceof RegExpCtor;
  };
  // The builtin's search, a window at a time: each window holds the next `SEARCH_COST / m`
  // places (at least one), so each native step costs at most that many comparisons, or `m`.
  // The engine asks its interrupt handler only every so many instructions, thousands of
  // such steps: the clock is asked after each one.
  const step = () => {
    if (overTime()) {
      throw new RangeErrorCtor('the script is over its CPU time');
    }
  };
  const windowOf = (pattern) => {
    const places = MathCtor.floor(SEARCH_COST / pattern.length);
    return places > 1 ? places : 1;
  };
  // GetMethod: `value[key]` read once; undefined when it is absent (or `value` is).
  const methodOf = (value, key, what) => {
    if (value === null || value === undefined) {
      return undefined;
    }
    const method = value[key];
    if (method === null || method === undefined) {
      return undefined;
    }
    if (typeof method !== 'function') {
      throw new TypeErrorCtor(what + ' is not a function');
    }
    return method;
  };
  // The first place at or after `from` where `pattern` is in `text`.
  const find = (text, pattern, from) => {
    const m = pattern.length;
    const places = windowOf(pattern);
    for (let low = from; low <= text.length - m; low += places) {
      step();
      const part = apply(strings.slice, text, [low, low + places + m - 1]);
      const at = apply(strings.indexOf, part, [pattern]);
      if (at >= 0) {
        return low + at;
      }
    }
    return -1;
  };
  // The last place at or before `from`.
  const findLast = (text, pattern, from) => {
    const m = pattern.length;
    const places = windowOf(pattern);
    for (let high = clamp(from, -1, text.length - m); high >= 0; high -= places) {
      step();
      const low = high - places + 1 > 0 ? high - places + 1 : 0;
      const part = apply(strings.slice, text, [low, high + m]);
      const at = apply(strings.lastIndexOf, part, [pattern]);
      if (at >= 0) {
        return low + at;
      }
    }
    return -1;
  };
  // GetSubstitution for a string pattern (no captures): $$, $&, $` and $'.
  const substitute = (matched, text, at, replacement) => {
    if (apply(strings.indexOf, replacement, ['$']) < 0) {
      return replacement;
    }
    let out = '';
    for (let i = 0; i < replacement.length; i++) {
      const c = replacement[i];
      const next = replacement[i + 1];
      if (c !== '$' || next === undefined) {
        out += c;
      } else if (next === '$') {
        out += '$';
        i++;
      } else if (next === '&') {
        out += matched;
        i++;
      } else if (next === '`') {
        out += apply(strings.slice, text, [0, at]);
        i++;
      } else if (next === "'") {
        out += apply(strings.slice, text, [at + matched.length]);
        i++;
      } else {
        out += c;
      }
    }
    return out;
  };
  // Pieces joined once at the end (repeated `+=` copies the whole text each time).
  const join = (pieces) => apply(originals.join, pieces, ['']);
  const put = (array, index, value) =>
    defineProperty(array, index, { value, writable: true, enumerable: true, configurable: true });
  // `replace` (first only) or `replaceAll` of a string pattern, the replacement converted.
  const replaceText = (text, pattern, replacement, all) => {
    const pieces = [];
    let count = 0;
    let kept = 0;
    for (let at = find(text, pattern, 0); at >= 0; at = all ? find(text, pattern, at + pattern.length) : -1) {
      put(pieces, count++, apply(strings.slice, text, [kept, at]));
      put(
        pieces,
        count++,
        typeof replacement === 'function'
          ? toText(replacement(pattern, at, text))
          : substitute(pattern, text, at, replacement),
      );
      kept = at + pattern.length;
    }
    put(pieces, count, apply(strings.slice, text, [kept]));
    return join(pieces);
  };
  const stringGuards = {
    indexOf(search, position) {
      const text = thisText('indexOf', this);
      const pattern = toText(search);
      if (!costly(text, pattern)) {
        return apply(strings.indexOf, text, [pattern, position]);
      }
      return find(text, pattern, clamp(integer(+position), 0, text.length));
    },
    lastIndexOf(search, position) {
      const text = thisText('lastIndexOf', this);
      const pattern = toText(search);
      if (!costly(text, pattern)) {
        return apply(strings.lastIndexOf, text, [pattern, position]);
      }
      const n = +position;
      return findLast(text, pattern, n !== n ? text.length : clamp(integer(n), 0, text.length));
    },
    includes(search, position) {
      const text = thisText('includes', this);
      if (isRegExp(search)) {
        throw new TypeErrorCtor('the first argument of String.prototype.includes must not be a regular expression');
      }
      const pattern = toText(search);
      if (!costly(text, pattern)) {
        return apply(strings.includes, text, [pattern, position]);
      }
      return find(text, pattern, clamp(integer(+position), 0, text.length)) >= 0;
    },
    split(separator, limit) {
      if (this === null || this === undefined) {
        return apply(strings.split, this, [separator, limit]);
      }
      // What each property read gives is used, never read again: a getter could answer
      // the builtin differently.
      const splitter = methodOf(separator, splitSymbol, 'Symbol.split');
      if (splitter !== undefined) {
        return apply(splitter, separator, [this, limit]);
      }
      const text = toText(this);
      const most = limit === undefined ? 2 ** 32 - 1 : +limit >>> 0;
      if (separator === undefined) {
        return apply(strings.split, text, [separator, most]);
      }
      const pattern = toText(separator);
      if (!costly(text, pattern)) {
        return apply(strings.split, text, [pattern, most]);
      }
      const pieces = [];
      let count = 0;
      let kept = 0;
      for (let at = find(text, pattern, 0); at >= 0 && count < most; at = find(text, pattern, kept)) {
        put(pieces, count++, apply(strings.slice, text, [kept, at]));
        kept = at + pattern.length;
      }
      if (count < most) {
        put(pieces, count, apply(strings.slice, text, [kept]));
      }
      return pieces;
    },
  };
  // `replace` and `replaceAll`: a RegExp (or anything with its own `Symbol.replace`) is the
  // builtin's to handle, and `replaceAll` checks a RegExp's flags first.
  const replacer = (name, all) =>
    ({
      [name](searchValue, replaceValue) {
        if (this === null || this === undefined) {
          return apply(strings[name], this, [searchValue, replaceValue]);
        }
        if (all && isRegExp(searchValue)) {
          const flags = searchValue.flags;
          if (flags === null || flags === undefined || apply(strings.indexOf, toText(flags), ['g']) < 0) {
            throw new TypeErrorCtor('String.prototype.replaceAll needs a global regular expression');
          }
        }
        const method = methodOf(searchValue, replaceSymbol, 'Symbol.replace');
        if (method !== undefined) {
          return apply(method, searchValue, [this, replaceValue]);
        }
        const text = toText(this);
      const pattern = toText(searchValue);
      const replacement = typeof replaceValue === 'function' ? replaceValue : toText(replaceValue);
        if (!costly(text, pattern)) {
          return apply(strings[name], text, [pattern, replacement]);
        }
        return replaceText(text, pattern, replacement, all);
      },
    })[name];
  stringGuards.replace = replacer('replace', false);
  stringGuards.replaceAll = replacer('replaceAll', true);
  // Normalizing puts each run of combining marks in order with a quadratic sort, in native
  // code (a run of 40,000 took 7 s): text with more than 30 in a row (Unicode's stream-safe
  // bound) is refused. `localeCompare` normalizes both texts first.
  const longMarkRun = /\p{M}{31}/u;
  // `exec` kept here: `test` would look up the script's.
  const regExpExec = RegExp.prototype.exec;
  const markRunsChecked = (name, text) => {
    if (apply(regExpExec, longMarkRun, [text]) !== null) {
      throw new RangeErrorCtor('String.prototype.' + name + ' on text with more than 30 combining marks in a row in code mode');
    }
    return text;
  };
  // Methods, as the builtins are: no `prototype`, not constructors.
  const normalizing = {
    normalize(form) {
      const text = markRunsChecked('normalize', thisText('normalize', this));
      return apply(strings.normalize, text, [form]);
    },
    localeCompare(that, ...rest) {
      const text = markRunsChecked('localeCompare', thisText('localeCompare', this));
      return apply(strings.localeCompare, text, [markRunsChecked('localeCompare', toText(that)), ...rest]);
    },
  };
  stringGuards.normalize = normalizing.normalize;
  stringGuards.localeCompare = normalizing.localeCompare;
  for (const name of ObjectCtor.keys(stringGuards)) {
    const described = getOwnDescriptor(stringProto, name);
    const guard = stringGuards[name];
    defineProperty(guard, 'name', { value: name });
    defineProperty(guard, 'length', { value: strings[name].length });
    defineProperty(stringProto, name, { ...described, value: guard });
  }

  // Regular expressions: the engine's matcher asks the interrupt every ten thousand
  // backtracks, each of which may compare as many characters as the pattern has (splitting
  // 'a'.repeat(2e5) by new RegExp('a'.repeat(1e5) + 'b') ran 7 s past the limit, longer with
  // longer texts). A pattern over MAX_PATTERN characters is refused by the matching methods,
  // once per call. `exec` is left as it is: the matching methods look it up at each place they
  // try (splitting a megabyte by a pattern ran five times slower through a guard); a script
  // calling it directly with such a pattern is left to the host's watch of its thread.
  const MAX_PATTERN = 4096;
  const regExpProto = RegExp.prototype;
  const sourceOf = getOwnDescriptor(regExpProto, 'source').get;
  const patternChecked = (name, re) => {
    let source;
    try {
      source = apply(sourceOf, re, []);
    } catch (e) {
      // Not a regular expression: the builtin says so.
      return;
    }
    if (typeof source === 'string' && source.length > MAX_PATTERN) {
      throw new RangeErrorCtor(
        'RegExp.prototype.' + name + ' with a pattern of ' + source.length + ' characters: at most ' + MAX_PATTERN + ' in code mode',
      );
    }
  };
  for (const key of ['test', Symbol.match, Symbol.matchAll, Symbol.replace, Symbol.search, Symbol.split]) {
    const described = getOwnDescriptor(regExpProto, key);
    const original = described.value;
    const label = typeof key === 'symbol' ? '[' + key.description + ']' : key;
    const guard = {
      [key](...args) {
        patternChecked(label, this);
        return apply(original, this, args);
      },
    }[key];
    defineProperty(guard, 'length', { value: original.length });
    defineProperty(regExpProto, key, { ...described, value: guard });
  }

  // The clock stands still at the script's start: dates can be made and read, time cannot
  // be measured (no busy-wait timers, no timing of tool calls).
  const RealDate = Date;
  const FrozenDate = function Date(...args) {
    if (new.target === undefined) {
      return RealDate.prototype.toString.call(new RealDate(startedAt));
    }
    return construct(RealDate, args.length === 0 ? [startedAt] : args, new.target);
  };
  defineProperty(FrozenDate, 'prototype', { value: RealDate.prototype, writable: false });
  FrozenDate.now = function now() {
    return startedAt;
  };
  FrozenDate.parse = RealDate.parse;
  FrozenDate.UTC = RealDate.UTC;
  defineProperty(RealDate.prototype, 'constructor', { value: FrozenDate, writable: true, configurable: true });
  defineProperty(G, 'Date', { value: FrozenDate, writable: true, enumerable: false, configurable: true });

  class ToolError extends ErrorCtor {
    constructor(message, kind, tool) {
      super(message);
      this.kind = kind;
      this.tool = tool;
    }
  }
  defineProperty(ToolError.prototype, 'name', { value: 'ToolError', writable: true, configurable: true });
  defineProperty(G, 'ToolError', { value: ToolError, writable: true, enumerable: false, configurable: true });

  // Calls waiting for the host, by id.
  const pending = new MapCtor();

  // A failure `{kind, message}` of the call made at `site` as the script sees it.
  const toolError = (failure, site, path) => {
    const error = new ToolError(path + ': ' + failure.message, failure.kind, path);
    defineProperty(error, 'stack', { value: site.stack, writable: true, configurable: true });
    return error;
  };

  const makeTool = (index, path) =>
    function (args) {
      // Where the script made the call: a failure points there.
      const site = new ErrorCtor();
      let id;
      try {
        // The call's id, or a failure the host found before sending it.
        id = hostCall(index, args);
      } catch (e) {
        return PromiseCtor.reject(e);
      }
      if (typeof id !== 'number') {
        return PromiseCtor.reject(toolError(id, site, path));
      }
      return new PromiseCtor((resolve, reject) => {
        pending.set(id, { resolve, reject, site, path });
      });
    };

  // `tools.search` finds tools that wait behind search and adds them here: with search
  // offered, `tools` and its namespaces stay extensible (what is in them cannot be changed).
  const tools = create(null);
  const namespaces = new MapCtor();
  const added = new MapCtor();
  const addTool = (serverIdent, toolIdent, index) => {
    if (added.has(index)) {
      return;
    }
    added.set(index, true);
    let namespace = namespaces.get(serverIdent);
    if (namespace === undefined) {
      namespace = create(null);
      namespaces.set(serverIdent, namespace);
      try {
        defineProperty(tools, serverIdent, { value: namespace, enumerable: true });
      } catch (e) {
        // The script made the name its own first; only it loses.
      }
    }
    const path = 'tools.' + serverIdent + '.' + toolIdent;
    try {
      defineProperty(namespace, toolIdent, { value: makeTool(index, path), enumerable: true });
    } catch (e) {
      // As above.
    }
  };
  for (const [serverIdent, entries] of manifest) {
    for (const [toolIdent, index] of entries) {
      addTool(serverIdent, toolIdent, index);
    }
  }
  const search = function search(query, limit) {
    const site = new ErrorCtor();
    if (limit !== null && typeof limit === 'object') {
      limit = limit.limit;
    }
    let id;
    try {
      id = hostSearch(query, limit);
    } catch (e) {
      return PromiseCtor.reject(e);
    }
    if (typeof id !== 'number') {
      return PromiseCtor.reject(toolError(id, site, 'tools.search'));
    }
    return new PromiseCtor((resolve, reject) => {
      pending.set(id, { resolve, reject, site, path: 'tools.search', search: true });
    });
  };
  defineProperty(tools, 'search', { value: search, enumerable: false });
  if (!searchOffered) {
    for (const namespace of namespaces.values()) {
      freeze(namespace);
    }
    freeze(tools);
  }
  defineProperty(G, 'tools', { value: tools, writable: false, enumerable: true, configurable: false });

  // console: each call is one captured entry, its arguments shown as Node shows the common ones.
  const show = (value) => {
    switch (typeof value) {
      case 'string':
        return value;
      case 'undefined':
        return 'undefined';
      case 'function':
        return '[function ' + (value.name || 'anonymous') + ']';
      case 'bigint':
        return StringCtor(value) + 'n';
      case 'symbol':
        return value.toString();
      default:
        if (value instanceof ErrorCtor) {
          return StringCtor(value.name) + ': ' + StringCtor(value.message);
        }
        try {
          const json = stringify(value);
          return json === undefined ? StringCtor(value) : json;
        } catch (e) {
          return StringCtor(value);
        }
    }
  };
  const writer = (level) =>
    function (...values) {
      let line = '';
      for (let i = 0; i < values.length; i++) {
        line += (i === 0 ? '' : ' ') + show(values[i]);
      }
      hostLog(level, line.length > logLimit ? line.slice(0, logLimit) : line);
    };
  const consoleObject = freeze({
    log: writer('log'),
    info: writer('info'),
    debug: writer('debug'),
    warn: writer('warn'),
    error: writer('error'),
  });
  defineProperty(G, 'console', { value: consoleObject, writable: true, enumerable: false, configurable: true });

  return {
    // The host settles call `id`: `ok` with the tool's value, or a failure `{kind, message}`.
    settle(id, ok, value) {
      const call = pending.get(id);
      if (call === undefined) {
        return;
      }
      pending.delete(id);
      if (ok && call.search) {
        // `{found, add}`: the tools found become callable, and the script gets what was found.
        for (const [serverIdent, toolIdent, index] of value.add) {
          addTool(serverIdent, toolIdent, index);
        }
        call.resolve(value.found);
      } else if (ok) {
        call.resolve(value);
      } else {
        call.reject(toolError(value, call.site, call.path));
      }
    },
    // The script's value as JSON; `[length, beginning]` when longer than `limit`;
    // undefined when it has no JSON form. Throws what JSON.stringify throws.
    serialize(value, limit) {
      const json = stringify(value);
      if (json !== undefined && json.length > limit) {
        return [json.length, json.slice(0, 300)];
      }
      return json;
    },
  };
});
