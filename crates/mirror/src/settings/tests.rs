use super::*;

fn failed(message: &str, permanent: bool) -> Failed {
    Failed {
        message: message.into(),
        permanent,
    }
}

#[test]
fn failures_back_off_then_permanent_ones_pause_until_resumed() {
    let mut m = Mirror::new("https://h/x.git", vec![], false, 3600).unwrap();
    assert_eq!(m.next_run(), Some(0), "a new mirror is due at once");
    assert!(!m.record(1000, Ok(())));
    assert_eq!(m.next_run(), Some(4600));
    // Transient failures: 30 s, 60 s, 120 s … never past the interval.
    let mut waits = Vec::new();
    for i in 0..9 {
        let t = 2000 + i * 10_000;
        assert!(!m.record(t, Err(&failed("HTTP 503", false))));
        waits.push(m.next_run().unwrap() - t);
    }
    assert_eq!(waits, [30, 60, 120, 240, 480, 960, 1920, 3600, 3600]);
    assert!(m.paused.is_none(), "transient failures never pause");
    m.due_now = true;
    assert_eq!(m.next_run(), Some(0));
    m.due_now = false;
    // Permanent failures pause at the third in a row.
    assert!(!m.record(200_000, Ok(())));
    assert!(!m.record(200_100, Err(&failed("HTTP 401", true))));
    assert!(!m.record(200_200, Err(&failed("HTTP 401", true))));
    assert!(m.record(200_300, Err(&failed("HTTP 401", true))));
    assert_eq!(m.next_run(), None);
    assert!(m.paused.as_deref().unwrap().contains("HTTP 401"));
    m.resume();
    assert_eq!((m.next_run(), m.failures), (Some(0), 0));
    // Leases: one's own does not hold one off; an expired one neither.
    m.lease = Some(Lease {
        owner: "a".into(),
        expires: 500,
    });
    assert!(m.held_by_other("b", 499).is_some());
    assert!(m.held_by_other("a", 499).is_none());
    assert!(m.held_by_other("b", 500).is_none());
}

#[test]
fn a_push_mirror_beside_a_pull_mirror_is_made_due_by_pushes() {
    let dir = tempfile::tempdir().unwrap();
    let store = gitstow_store::FsStore::new(dir.path()).unwrap();
    let due = |entry: &str| crate::due::load(&store).unwrap().repos.get(entry).copied();
    // No push mirror: a push reads the document and writes nothing.
    assert!(!pushed(&store, "org/app").unwrap());
    assert!(load(&store, "org/app").unwrap().is_none());
    let pull = Mirror::new("https://up/app.git", vec![], false, 600).unwrap();
    let push = Mirror::new("https://down/app.git", vec![], true, 600).unwrap();
    add(&store, "org/app", Direction::Pull, &pull, false).unwrap();
    add(&store, "org/app", Direction::Push, &push, false).unwrap();
    let refused = add(&store, "org/app", Direction::Push, &push, false).unwrap_err();
    assert!(refused
        .to_string()
        .contains("is pushed to https://down/app.git already"));
    assert_eq!((due("org/app"), due("org/app push")), (Some(0), Some(0)));
    // A run of each, then a push: only the push mirror is due again.
    update(&store, "org/app", |d| {
        d.pull.as_mut().unwrap().record(100, Ok(()));
        d.push.as_mut().unwrap().record(100, Ok(()));
        Ok(Some(()))
    })
    .unwrap()
    .unwrap();
    crate::due::set(&store, "org/app push", Some(700)).unwrap();
    assert!(pushed(&store, "org/app").unwrap());
    let (doc, _) = load(&store, "org/app").unwrap().unwrap();
    assert_eq!(doc.push.as_ref().unwrap().next_run(), Some(0));
    assert_eq!(doc.pull.as_ref().unwrap().next_run(), Some(700));
    assert_eq!(due("org/app push"), Some(0));
    // A paused push mirror stays paused.
    update(&store, "org/app", |d| {
        let p = d.push.as_mut().unwrap();
        p.due_now = false;
        p.paused = Some("401".into());
        Ok(Some(()))
    })
    .unwrap()
    .unwrap();
    assert!(!pushed(&store, "org/app").unwrap());
    // Each goes on its own; the document with them.
    assert_eq!(
        remove(&store, "org/app", Direction::Push, true)
            .unwrap()
            .as_deref(),
        Some("https://down/app.git")
    );
    assert_eq!(due("org/app push"), None);
    assert!(load(&store, "org/app").unwrap().unwrap().0.pull.is_some());
    remove(&store, "org/app", Direction::Pull, true).unwrap();
    assert!(load(&store, "org/app").unwrap().is_none());
}

#[test]
fn a_syncing_mirror_is_not_removed_and_no_mirror_pushes_to_its_own_upstream() {
    let dir = tempfile::tempdir().unwrap();
    let store = gitstow_store::FsStore::new(dir.path()).unwrap();
    let pull = Mirror::new("https://up/org/app.git", vec![], false, 600).unwrap();
    add(&store, "org/app", Direction::Pull, &pull, false).unwrap();
    // The pull mirror's own upstream as the push mirror's remote (with
    // or without `.git` and `/`): refused.
    for url in [
        "https://up/org/app.git",
        "https://up/org/app/",
        "https://up/org/app",
    ] {
        let push = Mirror::new(url, vec![], true, 600).unwrap();
        let e = add(&store, "org/app", Direction::Push, &push, false).unwrap_err();
        assert!(
            e.to_string()
                .contains("would push to the upstream it pulls from"),
            "{e}"
        );
    }
    // A live lease holds off `mirror remove`, not `repo delete`'s.
    update(&store, "org/app", |d| {
        d.pull.as_mut().unwrap().lease = Some(Lease {
            owner: "host/1-a".into(),
            expires: u64::MAX,
        });
        Ok(Some(()))
    })
    .unwrap()
    .unwrap();
    let e = remove(&store, "org/app", Direction::Pull, true).unwrap_err();
    assert!(e.to_string().contains("is syncing now (host/1-a"), "{e}");
    assert!(load(&store, "org/app").unwrap().is_some());
    assert!(remove(&store, "org/app", Direction::Pull, false)
        .unwrap()
        .is_some());
}

#[test]
fn a_sealed_password_opens_only_for_the_url_it_was_sealed_for() {
    let key = crate::secret::SealKey::from_hex(&"11".repeat(32)).unwrap();
    let mut m = Mirror::new("https://up/org/app.git", vec![], false, 600).unwrap();
    m.credential = Some(Credential::seal(&key, "org/app", &m.url, "bot", "pw-0123"));
    let t = std::time::Duration::from_secs(1);
    assert!(m.upstream("org/app", Some(&key), t).is_ok());
    // The URL changed in the bucket: the password does not open.
    m.url = "https://evil.example/capture.git".into();
    let e = m.upstream("org/app", Some(&key), t).unwrap_err();
    assert!(!e.contains("pw-0123"), "{e}");
}

#[test]
fn a_mirror_is_added_recorded_and_removed_by_compare_and_swap() {
    let dir = tempfile::tempdir().unwrap();
    let store = gitstow_store::FsStore::new(dir.path()).unwrap();
    assert!(load(&store, "org/app").unwrap().is_none());
    let m = Mirror::new("https://h/org/app.git/", vec![], false, 600).unwrap();
    assert_eq!(m.url, "https://h/org/app.git");
    assert_eq!(m.refs, ["refs/heads/*", "refs/tags/*"]);
    update(&store, "org/app", |d| {
        d.pull = Some(m.clone());
        Ok(Some(()))
    })
    .unwrap()
    .unwrap();
    update(&store, "org/app", |d| {
        let p = d.pull.as_mut().unwrap();
        p.record(100, Err(&failed("the upstream answered HTTP 503", false)));
        p.record(200, Err(&failed("again", false)));
        Ok(Some(()))
    })
    .unwrap()
    .unwrap();
    let (doc, _) = load(&store, "org/app").unwrap().unwrap();
    let p = doc.pull.unwrap();
    assert_eq!(
        (p.failures, p.last_attempt, p.last_success),
        (2, Some(200), None)
    );
    assert_eq!(p.last_error.as_deref(), Some("again"));
    update(&store, "org/app", |d| {
        d.pull = None;
        Ok(Some(()))
    })
    .unwrap()
    .unwrap();
    assert!(load(&store, "org/app").unwrap().is_none());
    for (url, refs, interval) in [
        ("https://u:p@h/x.git", vec![], 600),
        ("https://h/x.git", vec!["heads/*".to_owned()], 600),
        ("https://h/x.git", vec![], 5),
    ] {
        assert!(Mirror::new(url, refs, false, interval).is_err(), "{url}");
    }
}
