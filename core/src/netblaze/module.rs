//! Boot module 0 with a NetBlaze profile: the chain configuration, then — after a line
//! [`PROFILE_MARKER`] — the chain's profile in its own text form (docs/PROTOCOL.md "NetBlaze
//! profile"). One module carries both because QEMU hands a PVH kernel a single `-initrd`.

use alloc::format;
use alloc::string::String;
use core::fmt;

use crate::nf::config::ChainSpec;

use super::profile::Profile;

/// The line that ends the chain configuration and starts the profile.
pub const PROFILE_MARKER: &str = "[netblaze.profile]";

/// Why boot module 0 was refused: the module's line and what is wrong there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModuleError {
    /// 1-based line of the module.
    pub line: usize,
    /// What is wrong (`acl.rule: …`, `profile: rate: …`).
    pub message: String,
}

impl fmt::Display for ModuleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "chain config line {}: {}", self.line, self.message)
    }
}

/// Splits the module's text at the first line that is [`PROFILE_MARKER`] (surrounding
/// blanks ignored): the chain's text, and the profile's with the marker's line number.
pub fn split(text: &str) -> (&str, Option<(&str, usize)>) {
    let mut offset = 0;
    for (i, line) in text.split_inclusive('\n').enumerate() {
        if line.trim() == PROFILE_MARKER {
            let chain = text.get(..offset).unwrap_or("");
            let profile = text.get(offset + line.len()..).unwrap_or("");
            return (chain, Some((profile, i + 1)));
        }
        offset += line.len();
    }
    (text, None)
}

/// Parses the whole module: the chain and, if present, the profile. Errors carry the
/// module's line number (a profile's missing record: the marker's line).
pub fn parse(text: &str) -> Result<(ChainSpec, Option<Profile>), ModuleError> {
    let (chain, profile) = split(text);
    let spec = ChainSpec::parse(chain).map_err(|e| {
        // `SpecError` says "line N: …"; the error names the line once.
        let msg = format!("{e}");
        let rest = msg.split_once(": ").map_or(msg.as_str(), |(_, r)| r);
        ModuleError { line: e.line, message: String::from(rest) }
    })?;
    let Some((text, marker)) = profile else { return Ok((spec, None)) };
    let profile = Profile::parse(text).map_err(|e| ModuleError {
        line: marker + e.line as usize,
        message: format!("profile: {}: {}", e.key, e.kind),
    })?;
    Ok((spec, Some(profile)))
}

#[cfg(test)]
mod tests {
    use super::*;

    const PROFILE: &str = "version=1\ntsc_hz=1000000000\nepoch_ns=80000\nfrontier=1:100,64:80\n\
                           service=packet_cycles:500,flow_cycles:300\nrate=1:500\n";

    #[test]
    fn a_module_without_the_marker_is_a_chain_alone() {
        let (spec, profile) = parse("version=1\nnf=acl\n").unwrap();
        assert_eq!(spec.names().collect::<alloc::vec::Vec<_>>(), ["acl"]);
        assert!(profile.is_none());
    }

    #[test]
    fn the_marker_starts_the_profile() {
        let text = format!("version=1\nnf=acl\n  {PROFILE_MARKER} \n{PROFILE}");
        let (chain, rest) = split(&text);
        assert_eq!(chain, "version=1\nnf=acl\n");
        assert_eq!(rest, Some((PROFILE, 3)));
        let (spec, profile) = parse(&text).unwrap();
        assert_eq!(spec.names().count(), 1);
        assert_eq!(profile.unwrap().rate.pps(10), 500);
    }

    #[test]
    fn errors_name_the_modules_line() {
        let bad_chain = format!("version=1\nnf=bogus\n{PROFILE_MARKER}\n{PROFILE}");
        let e = parse(&bad_chain).unwrap_err();
        assert_eq!(e.line, 2, "{e}");
        let bad_profile = format!("version=1\n{PROFILE_MARKER}\n{}", PROFILE.replace("rate=1:500", "rate=1:500,2:600"));
        let e = parse(&bad_profile).unwrap_err();
        assert_eq!(e.line, 2 + 6, "{e}");
        assert!(e.to_string().starts_with("chain config line 8: profile: rate: "), "{e}");
        let missing = format!("version=1\n{PROFILE_MARKER}\n{}", PROFILE.replace("rate=1:500\n", ""));
        let e = parse(&missing).unwrap_err();
        assert_eq!((e.line, e.message.as_str()), (2, "profile: rate: missing"), "{e}");
    }
}
