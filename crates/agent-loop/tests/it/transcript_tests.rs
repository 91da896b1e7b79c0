//! The transcript: written as things happen, resumed from its messages.

use std::io::Write;

use agent_loop::{Agent, AgentConfig, Block, Message, Role, Transcript, load_messages};
use policy::Policy;
use serde_json::json;

use crate::fake::{Events, FakeSource, Recording, tool};

#[tokio::test]
async fn every_message_and_decision_is_on_disk_and_a_session_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("session.jsonl");
    let source = FakeSource::with(&[("s", vec![tool("t", json!({"type": "object"}))])]);
    let model = Recording::new(
        json!({"turns": [{"tool_calls": [{"name": "mcp__s__t"}]}, {"text": "first answer"}, {"text": "second answer"}]}),
    );
    let agent = Agent::new(model.clone(), source.clone(), Policy::default(), AgentConfig::default())
        .with_transcript(Transcript::open(&path).unwrap());
    let mut conversation = Vec::new();
    agent.run_turn(&mut conversation, "first question", &Events::default()).await.unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.lines().count() >= 6, "{text}");
    assert!(text.contains(r#""decision":"refused""#), "decisions are kept: {text}");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
    }

    // A new process resumes from the file.
    let mut resumed = load_messages(&path).unwrap();
    assert_eq!(resumed, conversation);
    let agent = Agent::new(model.clone(), source, Policy::default(), AgentConfig::default())
        .with_transcript(Transcript::open(&path).unwrap());
    agent.run_turn(&mut resumed, "second question", &Events::default()).await.unwrap();
    let last_request = model.requests.lock().unwrap().last().unwrap().messages.clone();
    assert_eq!(last_request.first().unwrap().text(), "first question", "the model sees the whole history");
    assert_eq!(load_messages(&path).unwrap().len(), 6);
}

#[test]
fn a_torn_last_line_and_a_dangling_tool_call_are_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    let mut t = Transcript::open(&path).unwrap();
    t.message(&Message::user("hello")).unwrap();
    t.message(&Message { role: Role::Assistant, content: vec![Block::text("hi")] }).unwrap();
    t.message(&Message::user("do it")).unwrap();
    t.message(&Message {
        role: Role::Assistant,
        content: vec![Block::ToolUse { id: "1".into(), name: "x".into(), input: json!({}) }],
    })
    .unwrap();
    drop(t);
    let mut f = std::fs::OpenOptions::new().append(true).open(&path).unwrap();
    f.write_all(br#"{"kind":"message","at_ms":1,"mess"#).unwrap();
    let messages = load_messages(&path).unwrap();
    assert_eq!(messages.len(), 3);
    assert_eq!(messages[2].text(), "do it");
}

#[test]
fn a_corrupt_line_in_the_middle_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    std::fs::write(
        &path,
        "{\"kind\":\"message\",\"at_ms\":1,\"message\":{\"role\":\"user\",\"content\":[]}}\nnot json\n{}\n",
    )
    .unwrap();
    let err = load_messages(&path).unwrap_err();
    assert!(err.to_string().contains("line 2"), "{err}");
}

fn call(ids: &[&str]) -> Message {
    Message {
        role: Role::Assistant,
        content: ids.iter().map(|id| Block::ToolUse { id: (*id).into(), name: "x".into(), input: json!({}) }).collect(),
    }
}

fn results(ids: &[&str]) -> Message {
    Message {
        role: Role::User,
        content: ids
            .iter()
            .map(|id| Block::ToolResult { tool_use_id: (*id).into(), content: "done".into(), is_error: false })
            .collect(),
    }
}

/// A line cut short by a crash is ended when the transcript is opened again: what a resumed
/// session appends is kept, and the file resumes again (glued to the cut line, it was lost and
/// the next resume failed on that line).
#[test]
fn a_session_resumed_after_a_torn_write_resumes_again() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    let mut t = Transcript::open(&path).unwrap();
    t.message(&Message::user("hello")).unwrap();
    drop(t);
    let mut f = std::fs::OpenOptions::new().append(true).open(&path).unwrap();
    // Cut inside a character ("é" is two bytes): not even UTF-8.
    f.write_all(b"{\"kind\":\"message\",\"at_ms\":1,\"message\":{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"caf\xc3").unwrap();
    assert_eq!(load_messages(&path).unwrap().len(), 1);
    let mut t = Transcript::open(&path).unwrap();
    t.message(&Message::user("again")).unwrap();
    t.message(&Message { role: Role::Assistant, content: vec![Block::text("hi")] }).unwrap();
    drop(t);
    let texts: Vec<String> = load_messages(&path).unwrap().iter().map(Message::text).collect();
    assert_eq!(texts, ["hello", "again", "hi"]);
}

/// Tool calls a turn cut short left without results are left out wherever they are (a resumed
/// session put them mid-conversation, and models refused it on every later resume), with any
/// partial answer to them.
#[test]
fn unanswered_tool_calls_are_left_out_wherever_they_are() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    let mut t = Transcript::open(&path).unwrap();
    for message in [
        Message::user("first"),
        call(&["a"]),
        results(&["a"]),
        call(&["b"]),
        Message::user("second"),
        call(&["c", "d"]),
        results(&["c"]),
        Message::user("third"),
        Message { role: Role::Assistant, content: vec![Block::text("ok")] },
    ] {
        t.message(&message).unwrap();
    }
    drop(t);
    let loaded = load_messages(&path).unwrap();
    assert_eq!(
        loaded,
        [
            Message::user("first"),
            call(&["a"]),
            results(&["a"]),
            Message::user("second"),
            Message::user("third"),
            Message { role: Role::Assistant, content: vec![Block::text("ok")] }
        ]
    );
}
