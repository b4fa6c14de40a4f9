//! Ref name rules for pushes: git-check-ref-format(1) as git's
//! receive-pack applies them (`builtin/receive-pack.c` `update()`:
//! `!starts_with(name, "refs/") || check_refname_format(name + 5, flags)`,
//! answered with `ng <ref> funny refname`).
//!
//! Because git checks the part after `refs/` without
//! `REFNAME_ALLOW_ONELEVEL`, a created or updated ref needs two components
//! after `refs/` (`refs/heads/x`, not `refs/x`); a deletion allows one
//! ([`check_ref_format_for_delete`]).

/// Why a ref name is refused (git-check-ref-format(1)); every variant
/// carries the offending name.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RefNameError {
    /// Pushed refs must live under `refs/` (this refuses `HEAD` and `main`).
    #[error("{name:?} does not start with \"refs/\"")]
    NotUnderRefs {
        /// The refused name.
        name: String,
    },
    /// Only one component after `refs/` (`refs/foo`), refused for updates
    /// as git does ("must contain at least one /" without --allow-onelevel).
    #[error("{name:?} needs at least two components after \"refs/\"")]
    OneLevel {
        /// The refused name.
        name: String,
    },
    /// An empty component: `//`, a trailing `/`, or nothing after `refs/`.
    #[error("{name:?} has an empty path component (\"//\" or a trailing \"/\")")]
    EmptyComponent {
        /// The refused name.
        name: String,
    },
    /// A component starting with `.`.
    #[error("{name:?} has a path component starting with \".\"")]
    ComponentStartsWithDot {
        /// The refused name.
        name: String,
    },
    /// A component ending with `.lock`.
    #[error("{name:?} has a path component ending with \".lock\"")]
    LockSuffix {
        /// The refused name.
        name: String,
    },
    /// Two consecutive dots `..`.
    #[error("{name:?} contains \"..\"")]
    DoubleDot {
        /// The refused name.
        name: String,
    },
    /// The sequence `@{`.
    #[error("{name:?} contains \"@{{\"")]
    AtBrace {
        /// The refused name.
        name: String,
    },
    /// An ASCII control character, DEL, space, `~ ^ : ? * [` or `\`.
    #[error("{name:?} contains the forbidden character {character:?}")]
    ForbiddenCharacter {
        /// The refused name.
        name: String,
        /// The first forbidden character.
        character: char,
    },
    /// The name ends with `.`.
    #[error("{name:?} ends with \".\"")]
    TrailingDot {
        /// The refused name.
        name: String,
    },
    /// The component after `refs/` is the single character `@`.
    #[error("{name:?} is \"@\" after \"refs/\"")]
    LoneAt {
        /// The refused name.
        name: String,
    },
}

/// Longest ref name a push may create or update, in bytes: git's files
/// backend stores a ref at its path, and a path longer than `PATH_MAX`
/// (4,096 bytes on Linux) cannot be created ("File name too long").
pub const MAX_REF_NAME_BYTES: usize = 4096;

/// Longest component of a ref name (between two `/`), in bytes: a file
/// or directory name of the files backend, `NAME_MAX` (255).
pub const MAX_REF_COMPONENT_BYTES: usize = 255;

/// Whether a push may create or update a ref of this name as far as its
/// length goes: at most [`MAX_REF_NAME_BYTES`], each component at most
/// [`MAX_REF_COMPONENT_BYTES`] (where git's files backend fails to lock
/// the ref). Deletions are not held to it, so that a ref stored before
/// the limit can still be removed.
pub fn ref_name_fits(name: &str) -> bool {
    name.len() <= MAX_REF_NAME_BYTES && name.split('/').all(|c| c.len() <= MAX_REF_COMPONENT_BYTES)
}

/// git check-ref-format rules for a full ref name as receive-pack applies
/// them to a create or update (git-check-ref-format(1); receive-pack
/// `update()`): must start with "refs/", at least two components after
/// it, no component starting with '.', no "..", no ASCII control chars or
/// DEL, no space ~ ^ : ? * [ \\, no trailing '/', no trailing '.', no
/// component ending in ".lock", no "@{", not "@" alone, no "//". "HEAD" is
/// refused (it is not under "refs/"). Bytes ≥ 0x80 are allowed, as in git.
pub fn check_ref_format(name: &str) -> Result<(), RefNameError> {
    check(name, false)
}

/// The same rules for a deletion (new id all zeros): receive-pack then
/// passes `REFNAME_ALLOW_ONELEVEL`, so `refs/foo` may be deleted.
pub fn check_ref_format_for_delete(name: &str) -> Result<(), RefNameError> {
    check(name, true)
}

fn check(name: &str, allow_onelevel: bool) -> Result<(), RefNameError> {
    let err_name = || name.to_owned();
    let Some(rest) = name.strip_prefix("refs/") else {
        return Err(RefNameError::NotUnderRefs { name: err_name() });
    };
    // git refs.c check_or_sanitize_refname(), applied to name + 5.
    if rest == "@" {
        return Err(RefNameError::LoneAt { name: err_name() });
    }
    let mut components = 0usize;
    for component in rest.split('/') {
        check_component(name, component)?;
        components += 1;
    }
    if rest.ends_with('.') {
        return Err(RefNameError::TrailingDot { name: err_name() });
    }
    if !allow_onelevel && components < 2 {
        return Err(RefNameError::OneLevel { name: err_name() });
    }
    Ok(())
}

/// git refs.c check_refname_component() without refspec patterns.
fn check_component(name: &str, component: &str) -> Result<(), RefNameError> {
    let err_name = || name.to_owned();
    let mut last = '\0';
    for ch in component.chars() {
        match ch {
            '.' if last == '.' => return Err(RefNameError::DoubleDot { name: err_name() }),
            '{' if last == '@' => return Err(RefNameError::AtBrace { name: err_name() }),
            c if c.is_ascii_control()
                || matches!(c, ' ' | '~' | '^' | ':' | '?' | '*' | '[' | '\\') =>
            {
                return Err(RefNameError::ForbiddenCharacter {
                    name: err_name(),
                    character: c,
                })
            }
            _ => {}
        }
        last = ch;
    }
    if component.is_empty() {
        return Err(RefNameError::EmptyComponent { name: err_name() });
    }
    if component.starts_with('.') {
        return Err(RefNameError::ComponentStartsWithDot { name: err_name() });
    }
    if component.ends_with(".lock") {
        return Err(RefNameError::LockSuffix { name: err_name() });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each name was checked with `git check-ref-format` (git 2.47): `true`
    /// where it exits 0. Receive-pack additionally requires "refs/" and two
    /// components after it, which all the accepted names here satisfy.
    const GIT_TABLE: &[(&str, bool)] = &[
        ("refs/heads/main", true),
        ("refs/heads/a..b", false),
        ("refs/heads/x.lock", false),
        ("refs/heads/a@{b", false),
        ("refs/heads/has space", false),
        ("refs/heads/ctl\x01", false),
        ("refs/heads/trail/", false),
        ("refs/heads/trail.", false),
        ("refs/heads/.hidden", false),
        ("HEAD", false),
        ("main", false),
        ("refs/heads//x", false),
        ("refs/heads/a*b", false),
        ("refs/tags/v1.0", true),
        ("@", false),
        ("refs/heads/@", true),
        ("refs/heads/a~b", false),
        ("refs/heads/a^b", false),
        ("refs/heads/a:b", false),
        ("refs/heads/a?b", false),
        ("refs/heads/a[b", false),
        ("refs/heads/a\\b", false),
        ("refs/heads/a\x7fb", false),
        ("refs/heads/a\tb", false),
        ("refs/heads/a/.b", false),
        ("refs/heads/.lock", false),
        ("refs/heads/@{", false),
        ("refs/heads/x.lock/y", false),
        ("refs/heads/\u{e9}", true),
        ("/refs/heads/x", false),
        ("refs/heads/a.b", true),
        ("refs/heads/a.", false),
        ("refs/heads/a@b", true),
        ("refs/", false),
    ];

    #[test]
    fn agrees_with_git_check_ref_format() {
        for &(name, ok) in GIT_TABLE {
            let got = check_ref_format(name);
            assert_eq!(got.is_ok(), ok, "{name:?}: {got:?}");
            if let Err(err) = got {
                assert!(err.to_string().contains(&format!("{name:?}")), "{err}");
            }
        }
    }

    #[test]
    fn variants_name_the_rule() {
        use RefNameError::*;
        let s = |n: &str| n.to_owned();
        assert_eq!(
            check_ref_format("HEAD"),
            Err(NotUnderRefs { name: s("HEAD") })
        );
        assert_eq!(
            check_ref_format("refs/heads/a..b"),
            Err(DoubleDot {
                name: s("refs/heads/a..b")
            })
        );
        assert_eq!(
            check_ref_format("refs/heads/x.lock"),
            Err(LockSuffix {
                name: s("refs/heads/x.lock")
            })
        );
        assert_eq!(
            check_ref_format("refs/heads/a@{b"),
            Err(AtBrace {
                name: s("refs/heads/a@{b")
            })
        );
        assert_eq!(
            check_ref_format("refs/heads/has space"),
            Err(ForbiddenCharacter {
                name: s("refs/heads/has space"),
                character: ' '
            })
        );
        assert_eq!(
            check_ref_format("refs/heads/ctl\x01"),
            Err(ForbiddenCharacter {
                name: s("refs/heads/ctl\x01"),
                character: '\x01'
            })
        );
        assert_eq!(
            check_ref_format("refs/heads/trail/"),
            Err(EmptyComponent {
                name: s("refs/heads/trail/")
            })
        );
        assert_eq!(
            check_ref_format("refs/heads//x"),
            Err(EmptyComponent {
                name: s("refs/heads//x")
            })
        );
        assert_eq!(
            check_ref_format("refs/heads/trail."),
            Err(TrailingDot {
                name: s("refs/heads/trail.")
            })
        );
        assert_eq!(
            check_ref_format("refs/heads/.hidden"),
            Err(ComponentStartsWithDot {
                name: s("refs/heads/.hidden")
            })
        );
        assert_eq!(
            check_ref_format("refs/@"),
            Err(LoneAt { name: s("refs/@") })
        );
        assert_eq!(
            check_ref_format("refs/foo"),
            Err(OneLevel {
                name: s("refs/foo")
            })
        );
    }

    /// Confirmed against git 2.47 receive-pack: creating `refs/foo` is
    /// answered "funny refname", deleting `refs/bar` passes the name check,
    /// and `refs/heads/HEAD` is accepted.
    #[test]
    fn receive_pack_one_level_rules() {
        assert!(check_ref_format("refs/foo").is_err());
        assert!(check_ref_format_for_delete("refs/foo").is_ok());
        assert!(check_ref_format_for_delete("refs/").is_err());
        assert!(check_ref_format_for_delete("refs/a..b").is_err());
        assert!(check_ref_format_for_delete("refs/@").is_err());
        assert!(check_ref_format("refs/heads/HEAD").is_ok());
    }

    #[test]
    fn long_names_and_components() {
        let part = "p".repeat(MAX_REF_COMPONENT_BYTES);
        assert!(ref_name_fits(&format!("refs/heads/{part}")));
        assert!(!ref_name_fits(&format!("refs/heads/{part}x")));
        let deep = format!("refs/heads/{}", "a/".repeat(2_040)) + "z";
        assert!(ref_name_fits(&deep[..deep.len().min(MAX_REF_NAME_BYTES)]));
        let long = format!("refs/heads/{}", "ab/".repeat(1_400)) + "z";
        assert!(long.len() > MAX_REF_NAME_BYTES && !ref_name_fits(&long));
    }
}
