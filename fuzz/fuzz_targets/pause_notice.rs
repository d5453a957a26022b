//! Fleet mode's pause notices (`robotsgate::pacing::PauseNotice`): the one-line texts the
//! replicas publish on Redis when an origin answers 429 or 503, which every replica reads.
//! Anything that can publish on the channel can write one, so the reading is the library's
//! first contact with them. Input: the text as it comes.
//!
//! Invariants: no panic; a text longer than `MAX_MESSAGE` is no notice; a notice read is
//! within the bounds (the pause and what is left of it at most `MAX_PAUSE`, a 429 or 503, a
//! product token of 1 to `MAX_AGENT` bytes with no space or control character, a
//! Retry-After, if any, not empty and with no control character); and the notice's own text
//! reads back as the same notice, whose text is that text again (unless it is past
//! `MAX_MESSAGE`, a host that grew in its canonical form: then it is refused too).

#![no_main]

use libfuzzer_sys::fuzz_target;
use robotsgate::pacing::PauseNotice;

fn same(a: &PauseNotice, b: &PauseNotice) -> bool {
    a.origin == b.origin && a.agent == b.agent && a.left == b.left && a.pause == b.pause
}

fuzz_target!(|data: &[u8]| {
    let Some(notice) = PauseNotice::from_message(data) else { return };
    assert!(data.len() <= PauseNotice::MAX_MESSAGE);
    assert!(notice.left <= PauseNotice::MAX_PAUSE && notice.pause.pause <= PauseNotice::MAX_PAUSE);
    assert!(matches!(notice.pause.status, 429 | 503));
    let agent = &*notice.agent;
    assert!((1..=PauseNotice::MAX_AGENT).contains(&agent.len()));
    assert!(!agent.contains(' ') && !agent.chars().any(char::is_control), "{agent:?}");
    if let Some(ra) = &notice.pause.retry_after {
        assert!(!ra.is_empty() && !ra.chars().any(char::is_control), "{ra:?}");
    }
    let text = notice.to_message();
    if text.len() > PauseNotice::MAX_MESSAGE {
        // An origin whose host grew in its canonical form (IDNA): the text is refused as
        // any that long is, and a replica publishing it is ignored, not misread.
        assert!(PauseNotice::from_message(text.as_bytes()).is_none());
        return;
    }
    let back = PauseNotice::from_message(text.as_bytes()).unwrap_or_else(|| panic!("{text:?} does not read back"));
    assert!(same(&notice, &back), "{notice:?} came back as {back:?}");
    assert_eq!(back.to_message(), text);
});
