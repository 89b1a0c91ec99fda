//! Rendering of the generated TypeScript modules the front ends import (`ui/src/bindings.ts`
//! for the tray's windows, `ui/src/dashboard/bindings.ts` for the dashboard): one place that
//! decides their layout, so both generators write the same shape. Pure: declarations in
//! (ts-rs `decl()` strings), module text out.

/// A module of `export`ed declarations under `header` (comment lines, ending in a blank
/// line). serde_json writes u64/i64 as plain JSON numbers, not BigInt, so ts-rs's
/// `bigint` becomes `number` (all values stay far below 2^53).
pub fn render(header: &str, decls: impl IntoIterator<Item = String>) -> String {
    let mut out = String::from(header);
    for d in decls {
        out += "export ";
        out += &d.replace("bigint", "number");
        out += "\n\n";
    }
    out.truncate(out.trim_end().len());
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn exports_each_declaration_with_numbers_for_bigints() {
        let m = super::render("// h\n\n", ["type A = { n: bigint, }".to_string(), "type B = string;".to_string()]);
        assert_eq!(m, "// h\n\nexport type A = { n: number, }\n\nexport type B = string;\n");
    }
}
