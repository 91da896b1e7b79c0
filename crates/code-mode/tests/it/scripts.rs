//! What scripts do with tools: chains, concurrency, failures, values and logs.

use std::time::Duration;

use code_mode::{CallError, CallErrorKind, Engine, ScriptError};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::support::{FakeTools, engine_with, error, value};

/// 200 records, a details tool and a summarizer.
fn records() -> FakeTools {
    FakeTools::default()
        .tool("crm", "list_records", |_| async {
            let records: Vec<Value> = (0..200)
                .map(|i| {
                    json!({
                        "id": i,
                        "name": format!("customer {i}"),
                        "region": if i % 40 == 7 { "north" } else { "south" },
                        "notes": "x".repeat(400),
                    })
                })
                .collect();
            Ok(json!({"records": records}))
        })
        .tool("crm", "get_details", |args| async move {
            let id = args.get("id").and_then(Value::as_u64).unwrap_or(0);
            Ok(json!({"id": id, "revenue": id * 1000, "contact": format!("c{id}@example.com")}))
        })
        .tool("report", "summarize", |args| async move {
            let items = args.get("items").and_then(Value::as_array).map_or(0, Vec::len);
            Ok(Value::String(format!(
                "{items} customers, total revenue {}",
                args.get("total").cloned().unwrap_or_default()
            )))
        })
}

#[tokio::test]
async fn a_script_chains_three_tools_and_filters_a_large_result() {
    let tools = records();
    let run = tools
        .run(
            &Engine::default(),
            r#"
            const { records } = await tools.crm.list_records({});
            const north = records.filter(r => r.region === "north");
            const details = [];
            for (const r of north) details.push(await tools.crm.get_details({ id: r.id }));
            const total = details.reduce((sum, d) => sum + d.revenue, 0);
            const summary = await tools.report.summarize({ items: details, total });
            console.log("picked", north.length, "of", records.length);
            return { summary, ids: details.map(d => d.id) };
            "#,
        )
        .await;
    assert_eq!(value(&run), json!({"summary": "5 customers, total revenue 435000", "ids": [7, 47, 87, 127, 167]}));
    assert_eq!(run.logs, ["picked 5 of 200"]);
    assert_eq!(run.calls, 7);
    let called = tools.called();
    assert_eq!(called.first().map(String::as_str), Some("mcp__crm__list_records"));
    assert_eq!(called.last().map(String::as_str), Some("mcp__report__summarize"));
    // Each call is known by the script's id and its number.
    let ids: Vec<String> =
        tools.calls.lock().map(|c| c.iter().map(|(_, _, id)| id.clone()).collect()).unwrap_or_default();
    assert_eq!(ids, (1..=7).map(|n| format!("script-1.{n}")).collect::<Vec<_>>());
    // The answer is a fraction of what passed through the script.
    let rendered = run.render();
    assert!(rendered.len() < 300, "{rendered}");
}

fn sleeper() -> FakeTools {
    FakeTools::default().tool("slow", "wait", |args| async move {
        let ms = args.get("ms").and_then(Value::as_u64).unwrap_or(0);
        tokio::time::sleep(Duration::from_millis(ms)).await;
        Ok(json!(ms))
    })
}

#[tokio::test]
async fn promise_all_runs_calls_at_once() {
    let tools = sleeper();
    let run = tools
        .run(&Engine::default(), "return await Promise.all([1, 2, 3, 4, 5].map(() => tools.slow.wait({ ms: 200 })));")
        .await;
    assert_eq!(value(&run), json!([200, 200, 200, 200, 200]));
    // All five were in flight at once.
    assert_eq!(tools.most_in_flight.load(std::sync::atomic::Ordering::SeqCst), 5);
    // Waiting is not the script's CPU time.
    assert!(run.cpu_time < Duration::from_millis(150), "{:?}", run.cpu_time);
}

#[tokio::test]
async fn the_concurrency_limit_queues_the_rest_in_order() {
    let tools = sleeper();
    let engine = engine_with(|l| l.concurrency = 2);
    let run =
        tools.run(&engine, "return await Promise.all([30, 20, 10, 5, 1].map(ms => tools.slow.wait({ ms })));").await;
    assert_eq!(value(&run), json!([30, 20, 10, 5, 1]));
    assert_eq!(tools.most_in_flight.load(std::sync::atomic::Ordering::SeqCst), 2);
    let args: Vec<Value> =
        tools.calls.lock().map(|c| c.iter().map(|(_, a, _)| a["ms"].clone()).collect()).unwrap_or_default();
    assert_eq!(args, [json!(30), json!(20), json!(10), json!(5), json!(1)]);
}

#[tokio::test]
async fn a_tool_error_is_an_exception_the_script_can_catch() {
    let tools = FakeTools::default()
        .tool("disk", "read", |_| async { Err(CallError::new(CallErrorKind::ToolError, "disk on fire\u{1b}[2J")) })
        .tool("disk", "ok", |_| async { Ok(json!("fine")) });
    let run = tools
        .run(
            &Engine::default(),
            r#"
            try {
              await tools.disk.read({ path: "a" });
              return "not reached";
            } catch (e) {
              return { caught: e instanceof ToolError, name: e.name, kind: e.kind, message: e.message, tool: e.tool, after: await tools.disk.ok() };
            }
            "#,
        )
        .await;
    assert_eq!(
        value(&run),
        json!({
            "caught": true,
            "name": "ToolError",
            "kind": "tool_error",
            "message": "tools.disk.read: disk on fire[2J",
            "tool": "tools.disk.read",
            "after": "fine",
        })
    );
}

#[tokio::test]
async fn an_uncaught_tool_error_points_at_the_call() {
    let tools = FakeTools::default().tool("gate", "drop_table", |_| async {
        Err(CallError::new(
            CallErrorKind::NotApproved,
            "the call to mcp__gate__drop_table was not run: refused by the user",
        ))
    });
    let run = tools
        .run(&Engine::default(), "const a = 1;\nconst b = 2;\n  await tools.gate.drop_table({});\nreturn a + b;")
        .await;
    let ScriptError::Exception(exception) = error(&run) else { panic!("{:?}", run.result) };
    assert_eq!(
        exception.message,
        "ToolError: tools.gate.drop_table: the call to mcp__gate__drop_table was not run: refused by the user"
    );
    assert_eq!((exception.line, exception.column), (Some(3), Some(20)));
    assert_eq!(
        run.render(),
        "Error: the script threw at line 3, column 20: ToolError: tools.gate.drop_table: the call to \
         mcp__gate__drop_table was not run: refused by the user"
    );
}

#[tokio::test]
async fn exceptions_carry_their_line_and_column() {
    let engine = Engine::default();
    let tools = FakeTools::default();
    let run = tools.run(&engine, "const x = null;\nfunction f() {\n  return x.field;\n}\nreturn f();").await;
    let ScriptError::Exception(exception) = error(&run) else { panic!("{:?}", run.result) };
    assert!(exception.message.starts_with("TypeError: "), "{}", exception.message);
    assert_eq!((exception.line, exception.column), (Some(3), Some(10)));

    // On the first line, the column is the script's own.
    let run = tools.run(&engine, "throw new RangeError('too far')").await;
    let ScriptError::Exception(exception) = error(&run) else { panic!("{:?}", run.result) };
    assert_eq!(exception.message, "RangeError: too far");
    assert_eq!((exception.line, exception.column), (Some(1), Some(11)));

    // A syntax error is reported where the parser stopped.
    let run = tools.run(&engine, "let a = 1;\nlet b = (2;\nreturn a;").await;
    let ScriptError::Exception(exception) = error(&run) else { panic!("{:?}", run.result) };
    assert!(exception.message.starts_with("SyntaxError: "), "{}", exception.message);
    assert_eq!(exception.line, Some(2));

    // A thrown value that is not an error has no place, only its text.
    let run = tools.run(&engine, "throw 'plain \\u001b[31mtext'").await;
    let ScriptError::Exception(exception) = error(&run) else { panic!("{:?}", run.result) };
    assert_eq!((exception.message.as_str(), exception.line), ("plain [31mtext", None));
}

#[tokio::test]
async fn values_logs_and_nothing() {
    let engine = Engine::default();
    let tools = FakeTools::default();
    let run = tools
        .run(
            &engine,
            r#"console.log("a", 1, { b: [2] }, undefined, null); console.warn("careful"); console.error(new TypeError("bad")); return [1, "two", { three: 3 }, null];"#,
        )
        .await;
    assert_eq!(value(&run), json!([1, "two", {"three": 3}, null]));
    assert_eq!(run.logs, ["a 1 {\"b\":[2]} undefined null", "warn: careful", "error: TypeError: bad"]);
    assert_eq!(
        run.render(),
        "[1,\"two\",{\"three\":3},null]\n\nconsole (3 entries):\na 1 {\"b\":[2]} undefined null\nwarn: careful\nerror: TypeError: bad"
    );
    let run = tools.run(&engine, "const x = 1;").await;
    assert_eq!(run.result, Ok(None));
    assert_eq!(run.render(), "(the script returned nothing)");
    let run = tools.run(&engine, "return 10n").await;
    assert!(matches!(error(&run), ScriptError::NotJson(m) if m.contains("BigInt")), "{:?}", run.result);
    let run = tools.run(&engine, "const a = {}; a.self = a; return a;").await;
    assert!(matches!(error(&run), ScriptError::NotJson(_)), "{:?}", run.result);
}

#[tokio::test]
async fn arguments_must_be_an_object_and_absent_ones_are_empty() {
    let tools = FakeTools::default().tool("t", "echo", |args| async move { Ok(Value::Object(args)) });
    let run = tools
        .run(
            &Engine::default(),
            r#"
            const empty = await tools.t.echo();
            let refused;
            try { await tools.t.echo([1, 2]); } catch (e) { refused = [e.kind, e.message]; }
            const dated = await tools.t.echo({ when: new Date(0), nested: { list: [1, "a"] } });
            return { empty, refused, dated };
            "#,
        )
        .await;
    assert_eq!(
        value(&run),
        json!({
            "empty": {},
            "refused": ["bad_arguments", "tools.t.echo: the arguments must be an object, like { path: \"notes.txt\" }"],
            "dated": {"when": "1970-01-01T00:00:00.000Z", "nested": {"list": [1, "a"]}},
        })
    );
    // The refused call never reached the host.
    assert_eq!(tools.called().len(), 2);
}

#[tokio::test]
async fn a_script_that_awaits_what_never_settles_ends_at_once() {
    let run = FakeTools::default().run(&Engine::default(), "await new Promise(() => {}); return 1;").await;
    assert_eq!(error(&run), &ScriptError::Stalled);
}

#[tokio::test]
async fn calls_not_awaited_are_dropped_when_the_script_returns() {
    let dropped = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = std::sync::Arc::clone(&dropped);
    let tools = FakeTools::default().tool("t", "ok", |_| async { Ok(json!("ok")) }).tool("t", "forever", move |_| {
        let guard = SetOnDrop(std::sync::Arc::clone(&flag));
        async move {
            let _guard = guard;
            std::future::pending::<()>().await;
            Ok(Value::Null)
        }
    });
    // The second call settles only after the first has started.
    let run = tools.run(&Engine::default(), "tools.t.forever(); await tools.t.ok(); return 'done';").await;
    assert_eq!(value(&run), json!("done"));
    assert_eq!(tools.called(), ["mcp__t__forever", "mcp__t__ok"]);
    assert!(dropped.load(std::sync::atomic::Ordering::SeqCst));
    assert_eq!(tools.in_flight.load(std::sync::atomic::Ordering::SeqCst), 0);
}

pub(crate) struct SetOnDrop(pub(crate) std::sync::Arc<std::sync::atomic::AtomicBool>);

impl Drop for SetOnDrop {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

#[test]
fn the_run_future_is_send() {
    fn is_send<T: Send>(_: &T) {}
    let engine = Engine::default();
    let tools = FakeTools::default();
    let script_tools = tools.script_tools();
    let run = engine.run("return 1", &script_tools, &tools, "id");
    is_send(&run);
}
