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
