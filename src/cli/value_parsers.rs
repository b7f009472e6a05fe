//! clap's parsers of the values the commands share: the model's named enums (their names listed
//! by the model, never by hand) and whole numbers in a range, in words where a value is wrong.

/// A named enum of the model that the command line takes, listed by the same `ALL` (or `NAMED`)
/// and `name` that parse it elsewhere: clap's help ("possible values") and its error for an
/// unknown value then say what the library accepts, with no list written out by hand to drift.
/// (clap's `ValueEnum` cannot be implemented here for the model's types.)
pub(crate) trait Named: Copy + Send + Sync + 'static {
    const ALL: &'static [Self];
    fn name(self) -> &'static str;
}

macro_rules! named_values {
    ($($type:ty => $list:expr),* $(,)?) => {$(
        impl Named for $type {
            const ALL: &'static [Self] = &$list;
            fn name(self) -> &'static str {
                <$type>::name(self)
            }
        }
    )*};
}

named_values!(
    nvfp4_model::model::bounds::KOrder => nvfp4_model::model::bounds::KOrder::ALL,
    nvfp4_model::problem::ProblemKind => nvfp4_model::problem::ProblemKind::ALL,
    nvfp4_model::problem::Distribution => nvfp4_model::problem::Distribution::NAMED,
    nvfp4_model::problem::scaled_gemm::OperandFormat => nvfp4_model::problem::scaled_gemm::OperandFormat::ALL,
    nvfp4_model::problem::scaled_gemm::OutDtype => nvfp4_model::problem::scaled_gemm::OutDtype::ALL,
    nvfp4_model::problem::scaled_gemm::Epilogue => nvfp4_model::problem::scaled_gemm::Epilogue::ALL,
);

/// clap's parser of a whole number from `min` to `max`, in words where it is not one: a
/// negative number, one past the range (a count that would overflow the campaign's
/// arithmetic), or no number at all. With `allow_negative_numbers` on the flag, `-1` reaches it
/// instead of reading as an unknown flag: `#[arg(allow_negative_numbers = true, value_parser =
/// whole::<usize>(0, MAX))]`.
pub(crate) fn whole<T>(
    min: u64,
    max: u64,
) -> impl Fn(&str) -> std::result::Result<T, String> + Clone + Send + Sync + 'static
where
    T: TryFrom<u64> + Clone + Send + Sync + 'static,
{
    move |text: &str| {
        let range = format!("a whole number from {min} to {max}");
        let text = text.trim();
        if text.starts_with('-') {
            return Err(format!("{text} is negative: expected {range}"));
        }
        let value: u64 = text.parse().map_err(|_| {
            if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
                format!("{text} is too large: expected {range}")
            } else {
                format!("expected {range}")
            }
        })?;
        if value < min || value > max {
            return Err(format!("{value} is out of range: expected {range}"));
        }
        T::try_from(value).map_err(|_| format!("{value} is too large for this machine"))
    }
}

/// The most cases a campaign may be asked for: far beyond any run's time, and far from where
/// a count of cases could overflow.
pub(crate) const MAX_CASES: u64 = 100_000_000;

/// clap's parser of a [`Named`] enum: `#[arg(value_parser = named::<T>())]`.
#[derive(Clone)]
pub(crate) struct NamedParser<T>(std::marker::PhantomData<T>);

pub(crate) fn named<T: Named>() -> NamedParser<T> {
    NamedParser(std::marker::PhantomData)
}

impl<T: Named> clap::builder::TypedValueParser for NamedParser<T> {
    type Value = T;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> std::result::Result<T, clap::Error> {
        let names = T::ALL.iter().map(|v| v.name());
        // clap's own parser of a list of names, for its error (the possible values, a
        // suggestion for a near miss).
        let text = clap::builder::PossibleValuesParser::new(names).parse_ref(cmd, arg, value)?;
        Ok(*T::ALL
            .iter()
            .find(|v| v.name() == text)
            .expect("clap accepted one of the names"))
    }

    fn possible_values(
        &self,
    ) -> Option<Box<dyn Iterator<Item = clap::builder::PossibleValue> + '_>> {
        Some(Box::new(
            T::ALL
                .iter()
                .map(|v| clap::builder::PossibleValue::new(v.name())),
        ))
    }
}
