//! `Repository::load_kept_state`: the state decoded once per version a
//! handle sees, on the embedded store.

use std::sync::Arc;

use gitstow_odb::{CommitOutcome, IndexCache, RepoState, Repository};
use gitstow_store::{FsStore, ObjectStore};

fn state(head: &str) -> RepoState {
    RepoState {
        head: Some(head.to_owned()),
        ..RepoState::default()
    }
}

#[test]
fn a_kept_state_is_reused_until_the_state_object_changes() {
    let tmp = tempfile::tempdir().unwrap();
    let store: Arc<dyn ObjectStore> = Arc::new(FsStore::new(tmp.path().join("store")).unwrap());
    let repo = Repository::new(store.clone(), "r", IndexCache::new());
    assert!(
        repo.load_kept_state().unwrap().is_none(),
        "no repository yet"
    );
    assert!(matches!(
        repo.commit_state(&state("refs/heads/a"), None).unwrap(),
        CommitOutcome::Committed(_)
    ));

    let first = repo.load_kept_state().unwrap().unwrap();
    let again = repo.load_kept_state().unwrap().unwrap();
    assert_eq!(first.state.head.as_deref(), Some("refs/heads/a"));
    assert!(
        Arc::ptr_eq(&first.state, &again.state),
        "unchanged: not decoded again"
    );
    assert_eq!(first.etag, again.etag);

    // Written through the handle: the written state is the kept one.
    let outcome = repo
        .commit_kept_state(state("refs/heads/b"), Some(&first.etag))
        .unwrap();
    let CommitOutcome::Committed(etag) = outcome else {
        panic!("the compare-and-swap lost")
    };
    let after_write = repo.load_kept_state().unwrap().unwrap();
    assert_eq!(after_write.etag, etag);
    assert_eq!(after_write.state.head.as_deref(), Some("refs/heads/b"));
    assert!(Arc::ptr_eq(
        &after_write.state,
        &repo.load_kept_state().unwrap().unwrap().state
    ));

    // Written by someone else: read and decoded afresh.
    let other = Repository::new(store, "r", IndexCache::new());
    assert!(matches!(
        other
            .commit_state(&state("refs/heads/c"), Some(&etag))
            .unwrap(),
        CommitOutcome::Committed(_)
    ));
    let fresh = repo.load_kept_state().unwrap().unwrap();
    assert_eq!(fresh.state.head.as_deref(), Some("refs/heads/c"));
    assert_ne!(fresh.etag, etag);
    // A stale compare-and-swap through the handle still loses.
    assert!(matches!(
        repo.commit_kept_state(state("refs/heads/d"), Some(&etag))
            .unwrap(),
        CommitOutcome::Conflict
    ));
    assert_eq!(
        repo.load_kept_state()
            .unwrap()
            .unwrap()
            .state
            .head
            .as_deref(),
        Some("refs/heads/c")
    );
}
