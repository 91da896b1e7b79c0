use pretty_assertions::assert_eq;
use serde_json::json;

use super::*;

fn tool(server: &str, name: &str) -> ScriptTool {
    ScriptTool::new(format!("mcp__{server}__{name}"), server, name, json!({"type": "object"}))
}

#[test]
fn identifiers_are_valid_and_avoid_reserved_words() {
    assert_eq!(identifier("read_file"), "read_file");
    assert_eq!(identifier("read-file"), "read_file");
    assert_eq!(identifier("query/table.v2"), "query_table_v2");
    assert_eq!(identifier("2fa"), "_2fa");
    assert_eq!(identifier(""), "_");
    assert_eq!(identifier("délete"), "d_lete");
    assert_eq!(identifier("delete"), "delete_");
    assert_eq!(identifier("__proto__"), "__proto___");
    assert_eq!(identifier("$ok"), "$ok");
}

#[test]
fn tools_are_grouped_by_server_and_ordered_by_raw_name() {
    let tools = ScriptTools::new([tool("zeta", "b"), tool("my files", "read"), tool("zeta", "a")]);
    let paths: Vec<String> = (0..tools.len()).filter_map(|i| tools.path(i)).collect();
    assert_eq!(paths, ["tools.my_files.read", "tools.zeta.a", "tools.zeta.b"]);
    assert_eq!(tools.get(0).map(ScriptTool::server), Some("my files"));
    assert_eq!(tools.find("zeta", "b"), Some(2));
    assert_eq!(&**tools.manifest(), r#"[["my_files",[["read",0]]],["zeta",[["a",1],["b",2]]]]"#);
}

#[test]
fn colliding_identifiers_get_suffixes_in_raw_name_order_whatever_the_input_order() {
    let one = ScriptTools::new([tool("s", "read_file"), tool("s", "read-file"), tool("s", "read.file")]);
    let other = ScriptTools::new([tool("s", "read.file"), tool("s", "read_file"), tool("s", "read-file")]);
    let paths = |t: &ScriptTools| -> Vec<(String, String)> {
        (0..t.len())
            .map(|i| (t.get(i).map(|x| x.tool().to_owned()).unwrap_or_default(), t.path(i).unwrap_or_default()))
            .collect()
    };
    assert_eq!(paths(&one), paths(&other));
    assert_eq!(
        paths(&one),
        [
            ("read-file".to_owned(), "tools.s.read_file".to_owned()),
            ("read.file".to_owned(), "tools.s.read_file_2".to_owned()),
            ("read_file".to_owned(), "tools.s.read_file_3".to_owned()),
        ]
    );
}

#[test]
fn servers_colliding_as_identifiers_get_suffixes_and_duplicates_are_dropped() {
    let tools = ScriptTools::new([tool("a-b", "x"), tool("a.b", "x"), tool("a-b", "x")]);
    assert_eq!(tools.len(), 2);
    assert_eq!(tools.path(0).as_deref(), Some("tools.a_b.x"));
    assert_eq!(tools.path(1).as_deref(), Some("tools.a_b_2.x"));
}

#[test]
fn a_suffix_never_takes_a_name_that_exists() {
    let tools = ScriptTools::new([tool("s", "a-2"), tool("s", "a_2"), tool("s", "a")]);
    let mut paths: Vec<String> = (0..tools.len()).filter_map(|i| tools.path(i)).collect();
    paths.sort();
    let unique: std::collections::BTreeSet<&String> = paths.iter().collect();
    assert_eq!(unique.len(), 3, "{paths:?}");
}

#[test]
fn a_server_named_search_yields_tools_search_and_deferred_tools_start_outside_the_manifest() {
    let tools =
        ScriptTools::new([tool("search", "query"), tool("web", "fetch").with_deferred(true), tool("web", "get")])
            .with_search(true);
    // `tools.search` is the search function: the server takes the next free name.
    assert_eq!(tools.path(0).as_deref(), Some("tools.search_2.query"));
    // A deferred tool is named like the others but is not in `tools` until a search finds it.
    assert_eq!(tools.path(1).as_deref(), Some("tools.web.fetch"));
    assert_eq!(&**tools.manifest(), r#"[["search_2",[["query",0]]],["web",[["get",2]]]]"#);
    assert_eq!((tools.deferred(), tools.searchable(), tools.by_name("mcp__web__fetch")), (1, true, Some(1)));
}
