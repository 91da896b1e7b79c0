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
  const { logLimit, maxArrayLength } = bounds;
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
