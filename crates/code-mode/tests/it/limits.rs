//! Every limit stops what goes past it with a clear error, and the host runs the next script
//! as if nothing happened.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use code_mode::{Engine, ScriptError};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::scripts::SetOnDrop;
use crate::support::{FakeTools, engine_with, error, threads_end, value};

fn ok_tools() -> FakeTools {
    FakeTools::default()
        .tool("t", "ok", |_| async { Ok(json!("ok")) })
        .tool("t", "wait", |args| async move {
            let ms = args.get("ms").and_then(Value::as_u64).unwrap_or(0);
            tokio::time::sleep(Duration::from_millis(ms)).await;
            Ok(json!(ms))
        })
        .tool("t", "huge", |_| async { Ok(Value::String("y".repeat(24 << 20))) })
}

/// After a limit stopped a script, the same engine runs the next one normally.
async fn host_unharmed(engine: &Engine, tools: &FakeTools) {
    let run = tools.run(engine, "return [await tools.t.ok(), 6 * 7];").await;
    assert_eq!(value(&run), json!(["ok", 42]));
    threads_end(engine).await;
}

#[tokio::test]
async fn an_infinite_loop_is_stopped_at_its_cpu_time() {
    let engine = engine_with(|l| l.cpu_time = Duration::from_millis(200));
    let tools = ok_tools();
    let run = tools.run(&engine, "while (true) {}").await;
    assert_eq!(error(&run), &ScriptError::CpuLimit { limit: Duration::from_millis(200) });
    assert!(run.cpu_time >= Duration::from_millis(200), "{:?}", run.cpu_time);
    assert!(
        run.render().starts_with("Error: the script used more than its 0.200 s of CPU time and was stopped"),
        "{}",
        run.render()
    );
    // The interrupt cannot be caught, and a loop after an await is stopped too.
    let run = tools
        .run(
            &engine,
            "await tools.t.ok(); for (;;) { try { while (true) {} } catch (e) { console.log('caught', e); } }",
        )
        .await;
    assert_eq!(error(&run), &ScriptError::CpuLimit { limit: Duration::from_millis(200) });
    assert!(run.logs.is_empty(), "{:?}", run.logs);
    host_unharmed(&engine, &tools).await;
}

/// Array builtins loop over `length` in native code, where the CPU limit cannot stop them,
/// and a `length` costs nothing to set: one a real array of the heap could not have is
/// refused (a sort of `length = 2 ** 28` ran 56 s past a 3 s limit). Real arrays, and
/// array-likes, below it work as ever.
#[tokio::test]
async fn array_builtins_refuse_a_length_no_array_of_the_heap_can_have() {
    let engine = engine_with(|l| l.cpu_time = Duration::from_millis(500));
    let tools = ok_tools();
    for (method, call) in [
        ("sort", "a.sort()"),
        ("reverse", "a.reverse()"),
        ("copyWithin", "a.copyWithin(0, 1)"),
        ("shift", "a.shift()"),
        ("unshift", "a.unshift(1)"),
        ("forEach", "a.forEach(() => {})"),
        ("sort", "Array.prototype.sort.call({ length: 2 ** 32 - 1 })"),
    ] {
        let script = format!(
            "const a = []; a.length = 2 ** 28; try {{ {call}; return 'ran'; }} catch (e) {{ return String(e); }}"
        );
        let started = std::time::Instant::now();
        let run = tools.run(&engine, &script).await;
        let said = value(&run);
        assert!(
            said.as_str()
                .is_some_and(|s| s.starts_with(&format!("RangeError: Array.prototype.{method} on a length of"))),
            "{call}: {said}"
        );
        assert!(started.elapsed() < Duration::from_secs(5), "{call} took {:?}", started.elapsed());
    }
    let run = tools.run(&engine, "const a = [3, 1, 2]; a.sort(); return [a, Array.prototype.map.call({length: 2, 0: 'x', 1: 'y'}, s => s + s)];").await;
    assert_eq!(value(&run), json!([[1, 2, 3], ["xx", "yy"]]));
    host_unharmed(&engine, &tools).await;
}

/// Lengths the guard did not see: on `concat`'s arguments, on arrays nested for `flat`, or
/// behind a getter that says one thing to the guard and another to the builtin. Each ran
/// past the CPU limit and went on after the run was dropped.
#[tokio::test]
async fn lengths_read_past_the_guard_are_refused_too() {
    let engine = engine_with(|l| l.cpu_time = Duration::from_millis(500));
    let tools = ok_tools();
    for (method, call) in [
        ("concat", "[].concat({length: 2 ** 53 - 1, [Symbol.isConcatSpreadable]: true})"),
        ("flat", "const a = []; a.length = 2 ** 32 - 1; [a].flat()"),
        ("flat", "const a = []; a.length = 2 ** 32 - 1; [[a]].flat(Infinity)"),
        ("flat", "const a = []; a.length = 2 ** 32 - 1; [1].flatMap(() => a)"),
        (
            "reverse",
            "let n = 0; const o = {get length() { return n++ ? 2 ** 53 - 1 : 0; }}; Array.prototype.reverse.call(o)",
        ),
        ("sort", "Array.prototype.sort.call({length: {valueOf: () => 5}})"),
    ] {
        let script = format!("try {{ {call}; return 'ran'; }} catch (e) {{ return String(e); }}");
        let started = std::time::Instant::now();
        let run = tools.run(&engine, &script).await;
        let said = value(&run);
        assert!(
            said.as_str().is_some_and(|s| s.starts_with(&format!("RangeError: Array.prototype.{method} on"))),
            "{call}: {said}"
        );
        assert!(started.elapsed() < Duration::from_secs(5), "{call} took {:?}", started.elapsed());
    }
    let run = tools
        .run(&engine, "return [[1, [2, [3]]].flat(Infinity), [1, 2].flatMap(x => [x, x]), [1].concat([2], 3, {a: 1}).length, Array.prototype.slice.call('ab'), Array.prototype.slice.call(new Uint8Array([7]))];")
        .await;
    assert_eq!(value(&run), json!([[1, 2, 3], [1, 1, 2, 2], 4, ["a", "b"], [7]]));
    assert_eq!(value(&tools.run(&engine, "return typeof Proxy;").await), json!("undefined"));
    host_unharmed(&engine, &tools).await;
}

/// An array of `holes` holes whose prototype chain is 1000 deep: `JSON.stringify` reads each
/// hole down the whole chain in native code, where the engine never polls its interrupt
/// (100,000 holes took 2.6 s of CPU here, whatever the limit).
fn stuck_in_a_builtin(holes: u32) -> String {
    format!(
        "let p = []; for (let i = 0; i < 1000; i++) p = Object.create(p); const a = []; a.length = {holes}; \
         Object.setPrototypeOf(a, p); return JSON.stringify(a).length;"
    )
}

/// A script stuck in a builtin is answered once its thread has used a second of CPU past the
/// limit (it ran on to the builtin's end, and the run answered then); its thread keeps its
/// turn until it is done, so stuck scripts never take more CPUs than `max_running`.
#[tokio::test]
async fn a_script_stuck_in_a_builtin_is_answered_a_second_past_its_limit() {
    let engine = engine_with(|l| {
        l.cpu_time = Duration::from_millis(100);
        l.max_running = 1;
    });
    let tools = ok_tools();
    let run = tools.run(&engine, &stuck_in_a_builtin(150_000)).await;
    assert_eq!(error(&run), &ScriptError::CpuLimit { limit: Duration::from_millis(100) });
    assert!(
        run.cpu_time >= Duration::from_millis(1100) && run.cpu_time < Duration::from_millis(2000),
        "{:?}",
        run.cpu_time
    );
    // Still stuck, with the engine's only turn.
    assert_eq!(engine.threads(), 1);
    let next = tokio::time::timeout(Duration::from_millis(300), tools.run(&engine, "return 1;")).await;
    assert!(next.is_err(), "the next script ran beside the stuck one");
    let next = tokio::time::timeout(Duration::from_secs(60), tools.run(&engine, "return 1;")).await;
    assert_eq!(next.as_ref().map(value).ok(), Some(json!(1)));
    host_unharmed(&engine, &tools).await;
}

/// The host's watch needs no timer of the caller's runtime: one built without `enable_time`
/// runs scripts, stuck ones included.
#[test]
fn a_runtime_without_timers_runs_scripts() {
    let runtime = tokio::runtime::Builder::new_current_thread().build().expect("a runtime");
    let engine = engine_with(|l| l.cpu_time = Duration::from_millis(100));
    let tools = ok_tools();
    runtime.block_on(async {
        assert_eq!(value(&tools.run(&engine, "return [await tools.t.ok(), 1];").await), json!(["ok", 1]));
        let run = tools.run(&engine, &stuck_in_a_builtin(60_000)).await;
        assert_eq!(error(&run), &ScriptError::CpuLimit { limit: Duration::from_millis(100) });
    });
}

/// A limit too far off for the host's watch to reach (`Duration::MAX`: no limit) is not
/// watched; the run goes as ever.
#[tokio::test]
async fn a_limit_of_duration_max_runs() {
    let engine = engine_with(|l| l.cpu_time = Duration::MAX);
    let tools = ok_tools();
    assert_eq!(value(&tools.run(&engine, "return [await tools.t.ok(), 1];").await), json!(["ok", 1]));
    host_unharmed(&engine, &tools).await;
}

/// A builtin that ran the script past its limit, but not stuck long enough for the host to
/// answer, does not get it a value: the run is over its limit all the same.
#[tokio::test]
async fn a_value_made_past_the_limit_is_not_given() {
    let engine = engine_with(|l| l.cpu_time = Duration::from_millis(100));
    let tools = ok_tools();
    // 0.8 s of CPU here: past the limit, short of the host's second of grace.
    let run = tools.run(&engine, &stuck_in_a_builtin(30_000)).await;
    assert_eq!(error(&run), &ScriptError::CpuLimit { limit: Duration::from_millis(100) });
    host_unharmed(&engine, &tools).await;
}

/// The engine's string search is quadratic in native code (this one ran 20 s past a 0.2 s
/// limit): a search that could cost that much runs in steps the CPU limit stops between.
#[tokio::test]
async fn quadratic_string_searches_stop_at_the_cpu_limit() {
    let engine = engine_with(|l| l.cpu_time = Duration::from_millis(200));
    let tools = ok_tools();
    for call in [
        "s.indexOf(t)",
        "s.lastIndexOf(t)",
        "s.includes(t)",
        "s.split(t)",
        "s.replace(t, '')",
        "s.replaceAll(t, '')",
        "s.indexOf({ toString: () => t })",
    ] {
        let script = format!("const s = 'a'.repeat(200000), t = 'a'.repeat(100000) + 'b'; return {call};");
        let run = tools.run(&engine, &script).await;
        assert_eq!(error(&run), &ScriptError::CpuLimit { limit: Duration::from_millis(200) }, "{call}");
        assert!(run.cpu_time < Duration::from_millis(700), "{call}: {:?}", run.cpu_time);
    }
    host_unharmed(&engine, &tools).await;
}

/// Searches long enough to run in steps give what the builtins give.
#[tokio::test]
async fn string_searches_in_steps_give_what_the_builtins_give() {
    let engine = engine_with(|l| l.cpu_time = Duration::from_secs(5));
    let tools = ok_tools();
    let script = r#"
        const x = 'x'.repeat(1000000);
        const s = x + 'abc' + x + 'abc' + 'y';
        const L = s.length;
        const thrown = (f) => { try { f(); return 'no'; } catch (e) { return e.name; } };
        return [
            s.indexOf('abc'), s.indexOf('abc', 1000001), s.indexOf('abd'), s.indexOf('abc', -3), s.indexOf('abc', Infinity),
            s.lastIndexOf('abc'), s.lastIndexOf('abc', 2000002), s.lastIndexOf('abc', NaN), s.lastIndexOf('abc', -5),
            s.includes('abc'), s.includes('abc', 2000004), s.includes({ toString: () => 'abc' }),
            s.split('abc').map((p) => p.length), s.split('abc', 1).length, s.split('abc', 0).length,
            s.replace('abc', '[$&$$]').length - L, s.replace('abc', "$'").length, s.replace('abc', '$`').length,
            s.replace('abc', (m, at, all) => m + at + all.length).slice(999998, 1000020),
            s.replaceAll('abc', '-').length - L,
            s.replaceAll('abc', (m, at) => '<' + at + '>').split('<').length,
            s.replaceAll('abc', '$1').length - L,
            thrown(() => String.prototype.indexOf.call(null, 'abc')),
            thrown(() => s.indexOf(Symbol('abc'))),
            thrown(() => s.includes(/abc/)),
            thrown(() => s.replaceAll(/abc/, '')),
            s.replace(/abc/g, '').length, s.split(/abc/).length,
            String.prototype.indexOf.name, String.prototype.indexOf.length, String.prototype.lastIndexOf.length,
            String.prototype.replaceAll.name, String.prototype.replace.length,
            'a-b-c'.split('-'), 'abc'.replace('b', '$&$&'), 'abcabc'.lastIndexOf('bc'),
        ];
    "#;
    let run = tools.run(&engine, script).await;
    assert_eq!(
        value(&run),
        json!([
            1_000_000,
            2_000_003,
            -1,
            1_000_000,
            -1,
            2_000_003,
            1_000_000,
            2_000_003,
            -1,
            true,
            false,
            true,
            [1_000_000, 1_000_000, 1],
            1,
            0,
            3,
            3_000_008,
            3_000_004,
            "xxabc10000002000007xxx",
            -4,
            3,
            -2,
            "TypeError",
            "TypeError",
            "TypeError",
            "TypeError",
            2_000_001,
            3,
            "indexOf",
            1,
            1,
            "replaceAll",
            2,
            ["a", "b", "c"],
            "abbc",
            4
        ])
    );
}

/// A guard reads each property once and uses what it read: a getter answering the builtin
/// differently on a second read gave the script the unguarded search back.
#[tokio::test]
async fn guards_read_what_they_check_once() {
    let engine = engine_with(|l| l.cpu_time = Duration::from_millis(200));
    let tools = ok_tools();
    let script = r#"
        const said = (f) => { try { return f(); } catch (e) { return e.name; } };
        const s = 'a'.repeat(200000);
        const once = (key, first) => {
            let n = 0;
            const o = new String('a'.repeat(100000) + 'b');
            Object.defineProperty(o, key, { get() { return n++ === 0 ? first : undefined; } });
            return o;
        };
        return [
            said(() => s.replace(once(Symbol.replace, () => 'replaced'), '')),
            said(() => s.replaceAll(once(Symbol.replace, () => 'all'), '')),
            said(() => s.split(once(Symbol.split, () => ['split']))),
            said(() => s.includes(once(Symbol.match, true))),
            said(() => s.replace({ [Symbol.replace]: 5 }, '')),
        ];
    "#;
    let run = tools.run(&engine, script).await;
    assert_eq!(value(&run), json!(["replaced", "all", ["split"], "TypeError", "TypeError"]));
    host_unharmed(&engine, &tools).await;
}

/// A regular expression's matcher asks the interrupt only every ten thousand backtracks,
/// each as long as the pattern: patterns over 4096 characters are refused where they run.
#[tokio::test]
async fn long_regular_expressions_are_refused_where_they_run() {
    let engine = engine_with(|l| l.cpu_time = Duration::from_millis(200));
    let tools = ok_tools();
    let script = r#"
        const said = (f) => { try { return f(); } catch (e) { return String(e); } };
        const s = 'a'.repeat(200000), long = 'a'.repeat(100000) + 'b';
        return [
            said(() => s.split(new RegExp(long))),
            said(() => s.search(long)),
            said(() => s.match(long)),
            said(() => new RegExp(long).test(s)),
            said(() => 'a-b'.split(new RegExp('-'.repeat(1)))),
            said(() => /b/.exec('abc').index),
            said(() => new RegExp('x'.repeat(4096)).test('x'.repeat(4096))),
        ];
    "#;
    let run = tools.run(&engine, script).await;
    let refused = |name: &str| {
        format!("RangeError: RegExp.prototype.{name} with a pattern of 100001 characters: at most 4096 in code mode")
    };
    assert_eq!(
        value(&run),
        json!([
            refused("[Symbol.split]"),
            refused("[Symbol.search]"),
            refused("[Symbol.match]"),
            refused("test"),
            ["a", "b"],
            1,
            true
        ])
    );
    assert!(run.cpu_time < Duration::from_millis(200), "{:?}", run.cpu_time);
    host_unharmed(&engine, &tools).await;
}

/// Normalizing sorts each run of combining marks with a quadratic sort in native code (a run
/// of 40,000 took 7 s): more than 30 in a row is refused; ordinary text is normalized as ever.
#[tokio::test]
async fn normalizing_long_runs_of_combining_marks_is_refused() {
    let engine = engine_with(|l| l.cpu_time = Duration::from_millis(500));
    let tools = ok_tools();
    let script = r#"
        const said = (f) => { try { return f(); } catch (e) { return String(e); } };
        const run = (n) => 'a' + '\u0301\u0316'.repeat(n);
        return [
            said(() => run(20000).normalize('NFD').length),
            said(() => run(15).normalize('NFD').length),
            said(() => 'b'.localeCompare(run(20000))),
            said(() => 'e\u0301'.normalize('NFC')),
            said(() => 'a'.localeCompare('b')),
        ];
    "#;
    let run = tools.run(&engine, script).await;
    let refused =
        "RangeError: String.prototype.normalize on text with more than 30 combining marks in a row in code mode";
    let refused_compare =
        "RangeError: String.prototype.localeCompare on text with more than 30 combining marks in a row in code mode";
    assert_eq!(value(&run), json!([refused, 31, refused_compare, "\u{e9}", -1]));
    host_unharmed(&engine, &tools).await;
}

#[tokio::test]
async fn loops_of_jobs_and_work_after_the_return_are_stopped_too() {
    let engine = engine_with(|l| l.cpu_time = Duration::from_millis(200));
    let tools = ok_tools();
    let limit = ScriptError::CpuLimit { limit: Duration::from_millis(200) };
    for script in [
        "for (;;) await null;",
        "const again = () => queueMicrotask(again); again(); await new Promise(() => {});",
        "return { toJSON() { for (;;) {} } };",
        "throw { get message() { for (;;) {} } };",
        "const p = Promise.reject(new Error('x')); p.catch(() => { for (;;) {} }); await tools.t.ok(); return 1;",
    ] {
        let run = tools.run(&engine, script).await;
        assert_eq!(error(&run), &limit, "{script}");
    }
    host_unharmed(&engine, &tools).await;
}

#[tokio::test]
async fn time_waiting_for_tools_is_not_cpu_time() {
    let engine = engine_with(|l| l.cpu_time = Duration::from_millis(150));
    let tools = ok_tools();
    let run = tools
        .run(
            &engine,
            "let total = 0; for (const ms of [200, 200, 200]) total += await tools.t.wait({ ms }); return total;",
        )
        .await;
    assert_eq!(value(&run), json!(600));
    assert!(run.cpu_time < Duration::from_millis(150), "{:?}", run.cpu_time);
}

#[tokio::test]
async fn a_memory_bomb_is_stopped_at_the_memory_limit() {
    let engine = engine_with(|l| l.memory_bytes = 16 << 20);
    let tools = ok_tools();
    let run =
        tools.run(&engine, "const hoard = []; while (true) hoard.push('x'.repeat(1 << 16) + hoard.length);").await;
    assert_eq!(error(&run), &ScriptError::MemoryLimit { limit: 16 << 20 });
    assert!(run.render().starts_with("Error: the script used more than its 16 MiB of memory"), "{}", run.render());
    // One huge allocation, and a string doubled until it does not fit.
    let run = tools.run(&engine, "return new Float64Array(1e8).length;").await;
    assert_eq!(error(&run), &ScriptError::MemoryLimit { limit: 16 << 20 });
    // An array that long is refused before it is filled (see the array builtins' test).
    let run = tools.run(&engine, "return new Array(1e8).fill(1).length;").await;
    assert!(
        matches!(error(&run), ScriptError::Exception(e) if e.message.starts_with("RangeError: Array.prototype.fill"))
    );
    let run = tools.run(&engine, "let a = [1, 'two', { three: 3 }]; for (;;) a = a.concat(a);").await;
    assert_eq!(error(&run), &ScriptError::MemoryLimit { limit: 16 << 20 });
    // Strings stop at the engine's length limit first: a plain exception.
    let run = tools.run(&engine, "let s = 'ab'; for (;;) s = s + s;").await;
    assert!(
        matches!(error(&run), ScriptError::Exception(e) if e.message == "InternalError: string too long"),
        "{:?}",
        run.result
    );
    host_unharmed(&engine, &tools).await;
}

#[tokio::test]
async fn a_tool_result_too_large_for_the_memory_fails_that_call_only() {
    let engine = engine_with(|l| l.memory_bytes = 16 << 20);
    let tools = ok_tools();
    let run = tools
        .run(&engine, "try { await tools.t.huge(); } catch (e) { return [e.kind, e.message, await tools.t.ok()]; }")
        .await;
    assert_eq!(
        value(&run),
        json!([
            "too_large",
            "tools.t.huge: its result (25165826 bytes of JSON) does not fit in the script's memory (16777216 bytes)",
            "ok"
        ])
    );
}

#[tokio::test]
async fn deep_recursion_is_a_range_error_not_a_crash() {
    let engine = Engine::default();
    let tools = ok_tools();
    let run = tools.run(&engine, "function down(n) { return down(n + 1) + 1; }\nreturn down(0);").await;
    let ScriptError::Exception(exception) = error(&run) else { panic!("{:?}", run.result) };
    assert!(exception.message.starts_with("RangeError: "), "{}", exception.message);
    host_unharmed(&engine, &tools).await;
}

#[tokio::test]
async fn a_call_flood_is_stopped_at_the_call_limit() {
    let engine = engine_with(|l| l.max_calls = 10);
    let tools = ok_tools();
    let run = tools.run(&engine, "for (;;) { try { await tools.t.ok(); } catch (e) {} }").await;
    assert_eq!(error(&run), &ScriptError::CallLimit { limit: 10 });
    assert_eq!(run.calls, 10);
    assert_eq!(tools.called().len(), 10);
    assert!(run.render().starts_with("Error: the script tried to make more than 10 tool calls"), "{}", run.render());

    // All at once: no call past the limit reaches the host.
    let flood = ok_tools();
    let run = flood.run(&engine, "await Promise.all(Array.from({ length: 1000 }, () => tools.t.ok()));").await;
    assert_eq!(error(&run), &ScriptError::CallLimit { limit: 10 });
    assert!(flood.called().len() <= 10, "{}", flood.called().len());
    host_unharmed(&engine, &tools).await;
}

#[tokio::test]
async fn an_oversize_return_fails_with_an_excerpt() {
    let engine = engine_with(|l| l.max_result_bytes = 1000);
    let tools = ok_tools();
    let run = tools.run(&engine, "return 'x'.repeat(998);").await;
    assert_eq!(value(&run), json!("x".repeat(998)));
    let run = tools.run(&engine, "return 'é'.repeat(600);").await;
    let ScriptError::ResultTooLarge { bytes, limit, excerpt } = error(&run) else { panic!("{:?}", run.result) };
    assert_eq!((*bytes, *limit), (1202, 1000));
    assert!(excerpt.starts_with("\"éé") && excerpt.chars().count() <= 200, "{excerpt}");
    let run = tools.run(&engine, "return { big: 'z'.repeat(5e6) };").await;
    let ScriptError::ResultTooLarge { bytes, excerpt, .. } = error(&run) else { panic!("{:?}", run.result) };
    assert!(*bytes > 5_000_000, "{bytes}");
    assert!(excerpt.starts_with("{\"big\":\"zzz"), "{excerpt}");
    assert!(run.render().contains("over the limit of 1000: return less"), "{}", run.render());
    host_unharmed(&engine, &tools).await;
}

#[tokio::test]
async fn console_output_past_its_limit_is_cut_and_counted() {
    let engine = engine_with(|l| l.max_log_bytes = 250);
    let tools = ok_tools();
    let run =
        tools.run(&engine, "for (let i = 0; i < 10; i++) console.log(String(i).repeat(100)); return 'done';").await;
    assert_eq!(value(&run), json!("done"));
    assert_eq!(run.logs.len(), 3);
    assert_eq!(run.logs[..2], ["0".repeat(100), "1".repeat(100)]);
    assert_eq!(run.logs[2], format!("{}…", "2".repeat(47)));
    assert_eq!(run.logs_dropped, Some((7, 753)));
    assert!(
        run.render().ends_with("… 753 more bytes of console output left out (7 more entries): over the log limit"),
        "{}",
        run.render()
    );
    // One enormous line is cut in the engine already.
    let run = tools.run(&engine, "console.log('q'.repeat(1e7)); return 1;").await;
    assert_eq!(value(&run), json!(1));
    assert_eq!(run.logs_dropped.map(|(entries, _)| entries), Some(0));
}

#[tokio::test]
async fn a_script_too_large_is_not_run() {
    let engine = engine_with(|l| l.max_script_bytes = 100);
    let run = ok_tools().run(&engine, &"1;".repeat(51)).await;
    assert_eq!(error(&run), &ScriptError::ScriptTooLarge { bytes: 102, limit: 100 });
    assert_eq!(engine.threads(), 0);
}

#[tokio::test]
async fn dropping_the_run_stops_a_busy_script() {
    let engine = Engine::default();
    let tools = ok_tools();
    let script_tools = tools.script_tools();
    let run = engine.run("while (true) {}", &script_tools, &tools, "s");
    assert!(tokio::time::timeout(Duration::from_millis(200), run).await.is_err());
    threads_end(&engine).await;
    host_unharmed(&engine, &tools).await;
}

#[tokio::test]
async fn dropping_the_run_drops_its_calls_in_flight() {
    let engine = Engine::default();
    let dropped = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&dropped);
    let called = Arc::new(tokio::sync::Notify::new());
    let calling = Arc::clone(&called);
    let tools = ok_tools().tool("t", "forever", move |_| {
        let guard = SetOnDrop(Arc::clone(&flag));
        calling.notify_one();
        async move {
            let _guard = guard;
            std::future::pending::<()>().await;
            Ok(Value::Null)
        }
    });
    let script_tools = tools.script_tools();
    let mut run = Box::pin(engine.run("return await tools.t.forever();", &script_tools, &tools, "s"));
    // Dropped once the call is in flight, however long the engine took to start.
    tokio::select! {
        () = called.notified() => {}
        _ = &mut run => panic!("the run ended"),
        () = tokio::time::sleep(Duration::from_secs(30)) => panic!("the call was never made"),
    }
    assert!(!dropped.load(Ordering::SeqCst));
    drop(run);
    assert!(dropped.load(Ordering::SeqCst), "the call in flight was not dropped");
    threads_end(&engine).await;
}

/// Scripts of one engine run at most `max_running` at once (each has a thread and a heap of
/// its own: a gateway's clients started 24 at once and took 1.2 GB); a further one waits its
/// turn, then runs.
#[tokio::test]
async fn scripts_beyond_max_running_wait_their_turn() {
    let log = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let seen = Arc::clone(&log);
    let tools = FakeTools::default().tool("t", "mark", move |args| {
        let seen = Arc::clone(&seen);
        async move {
            let who = args.get("who").and_then(Value::as_str).unwrap_or_default().to_owned();
            seen.lock().unwrap().push(format!("start {who}"));
            // Long enough for the other script's engine to start on a loaded machine.
            tokio::time::sleep(Duration::from_secs(1)).await;
            seen.lock().unwrap().push(format!("end {who}"));
            Ok(json!(who))
        }
    });
    for (max_running, overlapped) in [(1, false), (2, true)] {
        log.lock().unwrap().clear();
        let engine = engine_with(|l| l.max_running = max_running);
        let (a, b) = tokio::join!(
            tools.run(&engine, "return await tools.t.mark({ who: 'a' });"),
            tools.run(&engine, "return await tools.t.mark({ who: 'b' });"),
        );
        assert_eq!((value(&a), value(&b)), (json!("a"), json!("b")));
        let order = log.lock().unwrap().clone();
        assert_eq!(order[1].starts_with("start"), overlapped, "max_running {max_running}: {order:?}");
        threads_end(&engine).await;
    }
}
