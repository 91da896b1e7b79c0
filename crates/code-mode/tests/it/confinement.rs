//! A script reaches nothing but `tools`: no file system, network, environment, timers,
//! module loading or code made from strings. Each door is tried and found shut.

use code_mode::Engine;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::support::{FakeTools, value};

fn tools() -> FakeTools {
    FakeTools::default().tool("files", "read_file", |_| async { Ok(json!("contents")) })
}

async fn run(script: &str) -> Value {
    value(&tools().run(&Engine::default(), script).await)
}

#[tokio::test]
async fn the_global_object_holds_the_language_and_tools_console_toolerror_alone() {
    let globals = run("return Object.getOwnPropertyNames(globalThis).sort();").await;
    insta::assert_json_snapshot!(globals);
}

#[tokio::test]
async fn host_apis_are_absent() {
    let absent = run(r#"
        const names = ["require", "process", "module", "exports", "fetch", "XMLHttpRequest", "WebSocket",
          "setTimeout", "setInterval", "setImmediate", "performance", "Atomics", "SharedArrayBuffer", "eval",
          "std", "os", "print", "scriptArgs", "Deno", "Bun", "navigator", "importScripts", "Worker", "gc"];
        return names.filter(name => typeof globalThis[name] !== "undefined");
    "#)
    .await;
    assert_eq!(absent, json!([]));
}

#[tokio::test]
async fn modules_cannot_be_loaded() {
    let refused = run(r#"
        const tried = [];
        for (const name of ["fs", "node:fs", "./local.js", "/etc/passwd", "https://example.com/x.js", "std", "os"]) {
          try { await import(name); tried.push("loaded " + name); } catch (e) { tried.push(e.name); }
        }
        return tried;
    "#)
    .await;
    assert_eq!(refused, json!(vec!["ReferenceError"; 7]));
    // A static import is not even valid in a script.
    let run = tools().run(&Engine::default(), "import fs from 'fs';\nreturn 1;").await;
    assert!(run.render().starts_with("Error: the script threw at line 1"), "{}", run.render());
    assert!(run.render().contains("SyntaxError"), "{}", run.render());
}

#[tokio::test]
async fn no_code_is_made_from_strings() {
    let outcomes = run(r#"
        const attempts = {
          eval: () => eval("1"),
          indirect_eval: () => (0, globalThis.eval)("1"),
          function_ctor: () => Function("return globalThis")(),
          new_function: () => new Function("return 1")(),
          arrow_ctor: () => (() => {}).constructor("return 1")(),
          async_ctor: () => (async () => {}).constructor("return 1")(),
          generator_ctor: () => (function* () {}).constructor("yield 1")().next(),
          async_generator_ctor: () => (async function* () {}).constructor("yield 1")(),
          tool_ctor: () => tools.files.read_file.constructor("return 1")(),
          tool_ctor_ctor: () => tools.files.read_file.constructor.constructor("return 1")(),
          array_ctor_ctor: () => [].constructor.constructor("return 1")(),
          proto_ctor: () => Object.getPrototypeOf(tools.files.read_file).constructor("return 1")(),
          reflect: () => Reflect.construct(Function, ["return 1"])(),
          console_ctor: () => console.log.constructor("return 1")(),
        };
        const out = {};
        for (const [name, attempt] of Object.entries(attempts)) {
          try { out[name] = "ran: " + String(attempt()); } catch (e) { out[name] = e.name; }
        }
        return out;
    "#)
    .await;
    let Value::Object(outcomes) = outcomes else { panic!("{outcomes}") };
    for (name, outcome) in &outcomes {
        assert!(outcome == "EvalError" || outcome == "ReferenceError" || outcome == "TypeError", "{name}: {outcome}");
    }
    assert_eq!(outcomes.len(), 14);
    // Functions still work as values.
    let ok = run("return [typeof (() => 1), (() => 1) instanceof Function, typeof Function.prototype.call];").await;
    assert_eq!(ok, json!(["function", true, "function"]));
}

#[tokio::test]
async fn the_tools_object_cannot_be_changed_or_reached_around() {
    let outcome = run(r#"
        "use strict";
        const tried = [];
        for (const change of [
          () => { tools.files = {}; },
          () => { tools.files.read_file = () => "mine"; },
          () => { tools.other = {}; },
          () => { delete tools.files; },
          () => { globalThis.tools = {}; },
        ]) {
          try { change(); tried.push("changed"); } catch (e) { tried.push(e.name); }
        }
        return [tried, Object.keys(tools), Object.keys(tools.files), Object.getPrototypeOf(tools), await tools.files.read_file({})];
    "#)
    .await;
    // Sloppy mode (the script's own) ignores failed writes; none changed anything.
    assert_eq!(outcome[1], json!(["files"]));
    assert_eq!(outcome[2], json!(["read_file"]));
    assert_eq!(outcome[3], Value::Null);
    assert_eq!(outcome[4], json!("contents"));
}

#[tokio::test]
async fn the_clock_stands_still_and_dates_still_work() {
    let outcome = run(r#"
        const first = Date.now();
        let spin = 0;
        for (let i = 0; i < 2e6; i++) spin += i;
        const later = Date.now();
        class Stamp extends Date {}
        return {
          still: first === later && new Date().getTime() === first,
          recent: first > Date.UTC(2024, 0, 1),
          parsed: new Date("2025-03-04T05:06:07Z").toISOString(),
          utc: Date.UTC(2000, 0, 1),
          called: typeof Date(),
          subclass: new Stamp(0).toISOString() === "1970-01-01T00:00:00.000Z" && new Stamp() instanceof Date,
          random: typeof Math.random(),
        };
    "#)
    .await;
    assert_eq!(
        outcome,
        json!({
            "still": true,
            "recent": true,
            "parsed": "2025-03-04T05:06:07.000Z",
            "utc": 946684800000u64,
            "called": "string",
            "subclass": true,
            "random": "number",
        })
    );
}

#[tokio::test]
async fn nothing_blocks_the_thread_without_the_cpu_clock() {
    // Atomics.wait would sleep without using CPU time; it is gone, and so is every timer.
    let outcome = run(r#"
        const tried = [];
        try { Atomics.wait(new Int32Array(4), 0, 0, 1e9); tried.push("waited"); } catch (e) { tried.push(e.name); }
        try { setTimeout(() => {}, 10); tried.push("timer"); } catch (e) { tried.push(e.name); }
        return tried;
    "#)
    .await;
    assert_eq!(outcome, json!(["ReferenceError", "ReferenceError"]));
}
