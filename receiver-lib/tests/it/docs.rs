//! The README and POSTGRES.md show the exactly-once examples as they are compiled: each block
//! marked `<!-- example: examples/….rs -->` is that file, less its leading `//!` lines.

use std::path::Path;

#[test]
fn the_readmes_examples_are_the_compiled_example_files() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut checked = 0;
    for doc in ["README.md", "POSTGRES.md"] {
        let readme = std::fs::read_to_string(root.join(doc)).expect(doc);
        for (at, _) in readme.match_indices("<!-- example: ") {
            let rest = &readme[at + "<!-- example: ".len()..];
            let path = &rest[..rest.find(" -->").expect("marker end")];
            let block = &rest[rest.find("```rust").expect("a rust block after the marker")..];
            let block = &block[block.find('\n').expect("fence line") + 1..];
            let block = &block[..block.find("\n```").expect("closing fence")];
            let file = std::fs::read_to_string(root.join(path)).expect("example file");
            let code: Vec<&str> = file
                .lines()
                .skip_while(|line| line.starts_with("//!"))
                .skip_while(|line| line.is_empty())
                .collect();
            assert_eq!(
                block.trim_end(),
                code.join("\n").trim_end(),
                "{doc}'s block for {path} differs from the file"
            );
            checked += 1;
        }
    }
    assert_eq!(checked, 3, "one example per driver");
}
