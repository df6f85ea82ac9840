//! The nemesis loop (`super::runner`, an async function) driven by virtual time, without a
//! runtime: the loop's sleeps park it on an [`Alarm`], and whoever owns the clock (the
//! simulator, a test) polls it again when the clock reaches the time it asked for. Nothing
//! here reads a real clock, so a seed gives the same steps.

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

/// The virtual clock as the parked loop sees it: now, whether the run stopped, and when the
/// loop wants to run again.
#[derive(Debug, Default)]
pub struct Alarm {
    /// Nanoseconds since the nemesis started, as the clock's owner last set it.
    now: Cell<u64>,
    /// The run's time is up: every sleep ends at once.
    stopped: Cell<bool>,
    /// When the parked loop wants to run again (None: only when the run stops).
    wake_at: Cell<Option<u64>>,
}

impl Alarm {
    pub fn new() -> Rc<Alarm> {
        Rc::new(Alarm::default())
    }

    /// The virtual time now.
    pub fn now(&self) -> u64 {
        self.now.get()
    }

    /// A sleep until `until` (None: until the run stops); it yields true if the run stopped.
    pub fn sleep(self: &Rc<Self>, until: Option<u64>) -> Sleep {
        Sleep {
            alarm: Rc::clone(self),
            until,
        }
    }
}

/// A sleep of the loop on the virtual clock: done once the clock reaches `until` (false), or
/// at once when the run stopped (true).
pub struct Sleep {
    alarm: Rc<Alarm>,
    until: Option<u64>,
}

impl Future for Sleep {
    type Output = bool;

    fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<bool> {
        if self.alarm.stopped.get() {
            return Poll::Ready(true);
        }
        match self.until {
            Some(t) if self.alarm.now() >= t => Poll::Ready(false),
            until => {
                self.alarm.wake_at.set(until);
                Poll::Pending
            }
        }
    }
}

/// A loop parked between its steps.
pub struct Parked {
    alarm: Rc<Alarm>,
    /// The loop, until it returned.
    run: Option<Pin<Box<dyn Future<Output = ()>>>>,
}

impl Parked {
    /// `run` (whose sleeps are `alarm`'s), not yet started.
    pub fn new(alarm: Rc<Alarm>, run: impl Future<Output = ()> + 'static) -> Parked {
        Parked {
            alarm,
            run: Some(Box::pin(run)),
        }
    }

    /// Runs the loop at virtual time `now` until it waits again; returns when it next wants
    /// to run (None: not before the run stops, or it returned).
    pub fn step(&mut self, now: u64) -> Option<u64> {
        self.alarm.now.set(now);
        self.alarm.wake_at.set(None);
        self.poll();
        self.alarm.wake_at.get().filter(|_| self.run.is_some())
    }

    /// The run's time is up at `now`: the loop returns at once (what it undoes on its way
    /// out, it undoes now).
    pub fn stop(&mut self, now: u64) {
        self.alarm.now.set(now);
        self.alarm.stopped.set(true);
        self.poll();
    }

    /// Whether the loop returned.
    pub fn done(&self) -> bool {
        self.run.is_none()
    }

    fn poll(&mut self) {
        let Some(run) = self.run.as_mut() else {
            return;
        };
        let mut cx = Context::from_waker(Waker::noop());
        if run.as_mut().poll(&mut cx).is_ready() {
            self.run = None;
        }
    }
}
