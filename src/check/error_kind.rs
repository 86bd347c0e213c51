//! Why a spec does not check, as data: one [`CheckErrorKind`] variant per mistake, with typed
//! fields, and every message a user reads in its one `Display`. The checker adds where the
//! mistake is and what to do about it (a [`Diagnostic`]'s spans, labels and hints).
//!
//! Each kind has a stable code (`C0xx`), printed with the message (`error[C014]: unknown name
//! `dd``), so that tests and users can refer to a mistake without matching its wording. A call
//! that does not fit its primitive or task keeps the primitive's own kind and code
//! ([`PrimErrorKind`](crate::signature::PrimErrorKind), `P0xx`).

use std::fmt;

use crate::diag::Diagnostic;
use crate::signature::PrimError;
use crate::ty::{Shape, ShapeDisplay, Ty};
use crate::value::{Kind, Value};

use super::limits::{MAX_DRAWS, MAX_RANGE, MAX_STATE_AXIS, MAX_TRIALS};

#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum CheckErrorKind {
    // Calls and their arguments.
    PositionalAfterNamed,
    TooManyArguments {
        callee: String,
        takes: usize,
        signature: String,
        given: usize,
    },
    NoSuchArgument {
        callee: String,
        arg: String,
    },
    ArgumentTwice {
        arg: String,
    },
    MissingArgument {
        callee: String,
        arg: &'static str,
    },
    ArgumentKind {
        callee: String,
        arg: &'static str,
        expected: Kind,
        found: Value,
    },

    // Values known before the model runs (parameters, settings, sweeps).
    CallNotAValue {
        callee: String,
    },
    SpaceArguments {
        function: String,
    },
    SpaceCount {
        found: Value,
    },
    LogspaceBounds,
    UnknownName {
        name: String,
    },
    IntegerOverflow,
    /// `needs` says what the operator needs ("`not` needs a bool").
    WrongKind {
        needs: String,
        found: Value,
    },
    EmptyRange {
        lo: i64,
        hi: i64,
    },
    RangeTooLong {
        lo: i64,
        hi: i64,
    },
    Incomparable {
        a: Value,
        b: Value,
    },
    TensorOperatorOnNumbers {
        op: &'static str,
    },
    DivisionByZero,
    NotWhole {
        x: i64,
        y: i64,
    },

    // Models: states, the step, wiring.
    NoStep {
        model: String,
    },
    TwoSteps {
        model: String,
    },
    StepInputHides {
        input: String,
        what: &'static str,
    },
    NoOut {
        model: String,
    },
    OutputShape {
        found: Ty,
        task: String,
        logits: Shape,
    },
    StateDefinedTwice {
        name: String,
    },
    StateTakesOnlySizes {
        init: String,
    },
    StateSize {
        found: Value,
    },
    StateTooLarge {
        name: String,
        dims: Shape,
    },
    IdentitySizes,
    OnehotSize,
    NoSizes {
        init: String,
    },
    StateInit,
    InitOutsideState {
        name: String,
    },
    IfNotBool {
        found: Value,
    },
    IfNotKnown,
    TwoOuts,
    OutNotTensor {
        found: Value,
    },
    OutputCount {
        prim: &'static str,
        outputs: &'static [&'static str],
        names: usize,
    },
    OneValueManyNames {
        names: usize,
    },
    AssignParameter {
        name: String,
    },
    StateNotTensor {
        name: String,
    },
    StateShape {
        name: String,
        shape: Shape,
        found: Ty,
    },
    TensorInList,
    NotOnTensor,
    OperatorNeedsTensors {
        op: &'static str,
    },
    RangeInModel,
    ParameterOperatorOnTensors {
        op: &'static str,
    },
    TensorAndValue {
        op: &'static str,
        found: Value,
    },
    NumberOverTensor,
    UnknownPrimitive {
        name: String,
    },
    ArgumentNotTensor {
        callee: String,
        arg: &'static str,
        found: Value,
    },
    ArgumentNotKnown {
        callee: String,
        arg: &'static str,
    },
    TensorTooLarge {
        prim: &'static str,
        shape: Shape,
    },
    ParameterTooLarge {
        prim: &'static str,
        param: String,
        shape: Shape,
    },
    MultiInExpression {
        prim: &'static str,
        outputs: &'static [&'static str],
    },
    /// A call that does not fit its primitive.
    Primitive {
        prim: &'static str,
        error: PrimError,
    },

    // Model parameters.
    ParamDefinedTwice {
        name: String,
    },
    ParamDefault {
        name: String,
        declared: Kind,
        found: Value,
    },
    ParamUntyped {
        name: String,
    },
    ParamGiven {
        name: String,
        model: String,
        expected: Kind,
        found: Value,
    },
    ParamDefaultKind {
        name: String,
        found: Value,
        expected: Kind,
    },
    ParamMissing {
        model: String,
        name: String,
    },
    NoSuchParameter {
        model: String,
        name: String,
    },
    /// `input_size` or `output_size` declared as a model parameter: the task sets them.
    ParamReserved {
        name: String,
    },

    // Experiments.
    UnknownModel {
        name: String,
    },
    ModelParamsUnnamed,
    ParamGivenTwice {
        name: String,
    },
    TwoTrainBlocks {
        experiment: String,
    },
    TooManyTrials {
        experiment: String,
    },
    SweepUnknownParameter {
        name: String,
        model: String,
    },
    Ambiguous {
        name: String,
    },
    SweptKind {
        what: &'static str,
        name: String,
        expected: Kind,
        found: Value,
    },
    Seed {
        found: Value,
    },
    MissingPart {
        experiment: String,
        what: &'static str,
    },
    TwoParts {
        experiment: String,
        what: &'static str,
    },
    UnknownTask {
        name: String,
    },
    /// A task's options that do not fit its generator.
    TaskOption {
        task: &'static str,
        error: PrimError,
    },
    OverrideSetsNothing {
        name: String,
    },
    /// A command-line override whose left side is not a name (`1x=3`).
    OverrideNotAName {
        key: String,
    },
    /// A trial whose training memory (`needs`, in words) exceeds the memory free on its device.
    TooLargeForDevice {
        experiment: String,
        needs: String,
        at: String,
        place: String,
        free: String,
    },
    DefinedTwice {
        what: &'static str,
        name: String,
    },

    // Train settings.
    UnknownSetting {
        key: String,
    },
    SettingTwice {
        key: String,
    },
    OptimizerArgsUnnamed,
    SettingKind {
        key: String,
        expected: Kind,
        found: Value,
    },
    StopWhen,
    NoMetric {
        metric: String,
    },
    Select,
    SelectOnTestMetric {
        metric: String,
    },
    NoMetricToSelect {
        metric: String,
    },
    SettingTooSmall {
        key: String,
        found: i64,
    },
    SettingTooLarge {
        key: String,
        found: i64,
    },
    SettingNotSet {
        key: String,
    },
    NotPositive {
        key: String,
        found: Value,
    },
    UnknownOptimizer {
        name: String,
    },
    LearningRate {
        lr: f64,
    },
    UnknownDevice {
        name: String,
    },
    CheckpointEvery {
        minutes: f64,
    },
    SettingRange {
        key: String,
        found: f64,
        range: &'static str,
    },

    // Sweeps.
    EmptyAxis {
        name: String,
    },
    SweptTwice {
        name: String,
    },
    EmptyZip,
    ZipLengths {
        name: String,
        len: usize,
        first: String,
        first_len: usize,
    },
    ZipOverrideValue {
        name: String,
        value: String,
        partners: Vec<String>,
        values: Vec<String>,
    },
    RandomArguments,
    RandomCount,
    EmptyRandom,
    BadDistribution {
        name: String,
        why: &'static str,
    },
    UnknownDistribution {
        name: String,
    },

    // Searches.
    SearchSeedDrawn,
    SearchSetting {
        key: String,
    },
    SearchNothing,
    GridNeedsValues {
        name: String,
    },
    SearchTrials {
        found: i64,
        most: usize,
    },
    SearchNeedsTrials,
    SearchNeedsMetric,
    RungPastBudget {
        rung: usize,
        step: usize,
        steps: usize,
    },
    UnknownSampler {
        name: String,
    },
    UnknownPruner {
        name: String,
    },
    SearchArgument {
        function: String,
        arg: String,
        expected: &'static str,
    },
    SearchArgumentUnnamed {
        function: String,
    },
    SearchMetric {
        metric: String,
    },
    TwoSearchBlocks {
        experiment: String,
    },
    SearchAndSweep {
        experiment: String,
    },
    SearchOverride {
        name: String,
    },

    /// A bug in memctl found while checking (`what` went wrong).
    Internal {
        what: String,
    },
    /// A primitive's shape inference panicked: a bug in memctl.
    PrimitivePanicked {
        prim: &'static str,
    },
}

impl CheckErrorKind {
    /// The stable code of this kind of mistake (`C0xx`), or the primitive's (`P0xx`).
    pub fn code(&self) -> &'static str {
        use CheckErrorKind::*;
        match self {
            PositionalAfterNamed => "C001",
            TooManyArguments { .. } => "C002",
            NoSuchArgument { .. } => "C003",
            ArgumentTwice { .. } => "C004",
            MissingArgument { .. } => "C005",
            ArgumentKind { .. } => "C006",
            CallNotAValue { .. } => "C010",
            SpaceArguments { .. } => "C011",
            SpaceCount { .. } => "C012",
            LogspaceBounds => "C013",
            UnknownName { .. } => "C014",
            IntegerOverflow => "C015",
            WrongKind { .. } => "C016",
            EmptyRange { .. } => "C017",
            RangeTooLong { .. } => "C018",
            Incomparable { .. } => "C019",
            TensorOperatorOnNumbers { .. } => "C020",
            DivisionByZero => "C021",
            NotWhole { .. } => "C022",
            NoStep { .. } => "C030",
            TwoSteps { .. } => "C031",
            StepInputHides { .. } => "C032",
            NoOut { .. } => "C033",
            OutputShape { .. } => "C034",
            StateDefinedTwice { .. } => "C035",
            StateTakesOnlySizes { .. } => "C036",
            StateSize { .. } => "C037",
            StateTooLarge { .. } => "C038",
            IdentitySizes => "C039",
            OnehotSize => "C040",
            NoSizes { .. } => "C041",
            StateInit => "C042",
            InitOutsideState { .. } => "C043",
            IfNotBool { .. } => "C044",
            IfNotKnown => "C045",
            TwoOuts => "C046",
            OutNotTensor { .. } => "C047",
            OutputCount { .. } => "C048",
            OneValueManyNames { .. } => "C049",
            AssignParameter { .. } => "C050",
            StateNotTensor { .. } => "C051",
            StateShape { .. } => "C052",
            TensorInList => "C053",
            NotOnTensor => "C054",
            OperatorNeedsTensors { .. } => "C055",
            RangeInModel => "C056",
            ParameterOperatorOnTensors { .. } => "C057",
            TensorAndValue { .. } => "C058",
            NumberOverTensor => "C059",
            UnknownPrimitive { .. } => "C060",
            ArgumentNotTensor { .. } => "C061",
            ArgumentNotKnown { .. } => "C062",
            TensorTooLarge { .. } => "C063",
            ParameterTooLarge { .. } => "C064",
            MultiInExpression { .. } => "C065",
            Primitive { error, .. } => error.kind.code(),
            ParamDefinedTwice { .. } => "C070",
            ParamDefault { .. } => "C071",
            ParamUntyped { .. } => "C072",
            ParamGiven { .. } => "C073",
            ParamDefaultKind { .. } => "C074",
            ParamMissing { .. } => "C075",
            NoSuchParameter { .. } => "C076",
            ParamReserved { .. } => "C077",
            UnknownModel { .. } => "C080",
            ModelParamsUnnamed => "C081",
            ParamGivenTwice { .. } => "C082",
            TwoTrainBlocks { .. } => "C083",
            TooManyTrials { .. } => "C084",
            SweepUnknownParameter { .. } => "C085",
            Ambiguous { .. } => "C086",
            SweptKind { .. } => "C087",
            Seed { .. } => "C088",
            MissingPart { .. } => "C089",
            TwoParts { .. } => "C090",
            UnknownTask { .. } => "C091",
            TaskOption { error, .. } => error.kind.code(),
            OverrideSetsNothing { .. } => "C092",
            OverrideNotAName { .. } => "C094",
            TooLargeForDevice { .. } => "C095",
            DefinedTwice { .. } => "C093",
            UnknownSetting { .. } => "C100",
            SettingTwice { .. } => "C101",
            OptimizerArgsUnnamed => "C102",
            SettingKind { .. } => "C103",
            StopWhen => "C104",
            NoMetric { .. } => "C105",
            Select => "C106",
            SelectOnTestMetric { .. } => "C107",
            NoMetricToSelect { .. } => "C108",
            SettingTooSmall { .. } => "C109",
            SettingTooLarge { .. } => "C110",
            SettingNotSet { .. } => "C111",
            NotPositive { .. } => "C112",
            UnknownOptimizer { .. } => "C113",
            LearningRate { .. } => "C114",
            UnknownDevice { .. } => "C115",
            CheckpointEvery { .. } => "C116",
            EmptyAxis { .. } => "C120",
            SweptTwice { .. } => "C121",
            EmptyZip => "C122",
            ZipLengths { .. } => "C123",
            ZipOverrideValue { .. } => "C129",
            RandomArguments => "C124",
            RandomCount => "C125",
            EmptyRandom => "C126",
            BadDistribution { .. } => "C127",
            UnknownDistribution { .. } => "C128",
            SearchSeedDrawn => "C130",
            SearchSetting { .. } => "C131",
            SearchNothing => "C132",
            GridNeedsValues { .. } => "C133",
            SearchTrials { .. } => "C134",
            SearchNeedsTrials => "C135",
            SearchNeedsMetric => "C136",
            RungPastBudget { .. } => "C137",
            UnknownSampler { .. } => "C138",
            UnknownPruner { .. } => "C139",
            SearchArgument { .. } => "C140",
            SearchArgumentUnnamed { .. } => "C141",
            SearchMetric { .. } => "C142",
            TwoSearchBlocks { .. } => "C143",
            SearchAndSweep { .. } => "C144",
            SearchOverride { .. } => "C145",
            SettingRange { .. } => "C146",
            Internal { .. } => "C900",
            PrimitivePanicked { .. } => "C901",
        }
    }

    /// A diagnostic of this kind, to be located with [`Diagnostic::at`].
    pub fn error(self) -> Diagnostic {
        Diagnostic::error(self.to_string()).code(self.code())
    }
}

impl From<CheckErrorKind> for Diagnostic {
    fn from(kind: CheckErrorKind) -> Diagnostic {
        kind.error()
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

impl fmt::Display for CheckErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use CheckErrorKind::*;
        match self {
            PositionalAfterNamed => write!(f, "positional argument after a named one"),
            TooManyArguments { callee, takes, signature, given } => {
                write!(f, "{callee} takes {takes} argument{} ({signature}), but {given} were given", plural(*takes))
            }
            NoSuchArgument { callee, arg } => write!(f, "{callee} has no argument `{arg}`"),
            ArgumentTwice { arg } => write!(f, "argument `{arg}` given twice"),
            MissingArgument { callee, arg } => write!(f, "{callee} needs argument `{arg}`"),
            ArgumentKind { callee, arg, expected, found } => {
                write!(
                    f,
                    "argument `{arg}` of {callee} must be {}, found {}",
                    expected.with_article(),
                    found.describe()
                )
            }

            CallNotAValue { callee } => write!(f, "`{callee}(…)` cannot be used here"),
            SpaceArguments { function } => write!(f, "`{function}` takes a start, an end and a count"),
            SpaceCount { found } => {
                write!(f, "the count must be an integer from 1 to {MAX_RANGE}, found {}", found.describe())
            }
            LogspaceBounds => write!(f, "`logspace` needs positive bounds"),
            UnknownName { name } => write!(f, "unknown name `{name}`"),
            IntegerOverflow => write!(f, "integer overflow"),
            WrongKind { needs, found } => write!(f, "{needs}, found {}", found.describe()),
            EmptyRange { lo, hi } => write!(f, "empty range {lo}..{hi}"),
            RangeTooLong { lo, hi } => write!(f, "range {lo}..{hi} has more than {MAX_RANGE} values"),
            Incomparable { a, b } => write!(f, "cannot compare {} with {}", a.describe(), b.describe()),
            TensorOperatorOnNumbers { op } => write!(f, "`{op}` works on tensors, not on numbers"),
            DivisionByZero => write!(f, "division by zero"),
            NotWhole { x, y } => write!(f, "{x} / {y} is not a whole number"),

            NoStep { model } => write!(f, "model `{model}` has no `step`"),
            TwoSteps { model } => write!(f, "model `{model}` has two `step` blocks"),
            StepInputHides { input, what } => write!(f, "the step input `{input}` hides {what}"),
            NoOut { model } => write!(f, "the step of `{model}` has no `out`"),
            OutputShape { found, task, logits } => {
                write!(
                    f,
                    "the step's output has shape {found}, but task `{task}` scores {} logits",
                    ShapeDisplay(logits)
                )
            }
            StateDefinedTwice { name } => write!(f, "state `{name}` is already defined"),
            StateTakesOnlySizes { init } => write!(f, "`{init}` takes only sizes"),
            StateSize { found } => {
                write!(f, "state sizes must be whole numbers from 1 to {MAX_STATE_AXIS}, found {}", found.describe())
            }
            StateTooLarge { name, dims } => write!(f, "state `{name}` is too large: {}", ShapeDisplay(dims)),
            IdentitySizes => write!(f, "`identity` needs at least two sizes: rows and columns"),
            OnehotSize => write!(f, "`onehot` needs a size"),
            NoSizes { init } => write!(f, "`{init}` needs at least one size"),
            StateInit => write!(f, "a state starts from `zeros(…)`, `learned(…)`, `identity(…)` or `onehot(…)`"),
            InitOutsideState { name } => write!(f, "`{name}` can only initialise a `state`"),
            IfNotBool { found } => write!(f, "`if` needs a bool, found {}", found.describe()),
            IfNotKnown => write!(f, "`if` conditions must be known before the model runs"),
            TwoOuts => write!(f, "the step has two `out` statements"),
            OutNotTensor { found } => write!(f, "`out` needs a tensor, found {}", found.describe()),
            OutputCount { prim, outputs, names } => write!(
                f,
                "`{prim}` returns {} values ({}), but {names} name{} assigned",
                outputs.len(),
                outputs.join(", "),
                if *names == 1 { " is" } else { "s are" }
            ),
            OneValueManyNames { names } => write!(f, "{names} names assigned from one value"),
            AssignParameter { name } => write!(f, "cannot assign to parameter `{name}`"),
            StateNotTensor { name } => write!(f, "state `{name}` must be assigned a tensor"),
            StateShape { name, shape, found } => {
                write!(f, "state `{name}` has shape {}, but is assigned a value of shape {found}", ShapeDisplay(shape))
            }
            TensorInList => write!(f, "lists hold numbers, bools or strings, not tensors"),
            NotOnTensor => write!(f, "`not` needs a bool, found a tensor"),
            OperatorNeedsTensors { op } => write!(f, "`{op}` needs two tensors"),
            RangeInModel => write!(f, "ranges `a..b` are for sweeps"),
            ParameterOperatorOnTensors { op } => write!(f, "`{op}` works on parameters, not on tensors"),
            TensorAndValue { op, found } => write!(f, "`{op}` between a tensor and {}", found.describe()),
            NumberOverTensor => write!(f, "a number divided by a tensor is not supported"),
            UnknownPrimitive { name } => write!(f, "unknown primitive `{name}`"),
            ArgumentNotTensor { callee, arg, found } => {
                write!(f, "argument `{arg}` of {callee} must be a tensor, found {}", found.describe())
            }
            ArgumentNotKnown { callee, arg } => {
                write!(f, "argument `{arg}` of {callee} must be known before the model runs, but is a tensor")
            }
            TensorTooLarge { prim, shape } => write!(
                f,
                "`{prim}` would give a tensor of shape {}: more than 2^28 elements per example",
                ShapeDisplay(shape)
            ),
            ParameterTooLarge { prim, param, shape } => write!(
                f,
                "`{prim}` would have a parameter `{param}` of shape {}: more than 2^28 elements",
                ShapeDisplay(shape)
            ),
            MultiInExpression { prim, outputs } => write!(
                f,
                "`{prim}` returns {} values ({}); it cannot be used inside an expression",
                outputs.len(),
                outputs.join(", ")
            ),
            Primitive { prim, error } => write!(f, "{prim}: {error}"),

            ParamDefinedTwice { name } => write!(f, "parameter `{name}` is defined twice"),
            ParamDefault { name, declared, found } => {
                write!(f, "parameter `{name}` is declared {declared}, but its default is {}", found.describe())
            }
            ParamUntyped { name } => write!(f, "parameter `{name}` has neither a type nor a default"),
            ParamGiven { name, model, expected, found } => {
                write!(
                    f,
                    "parameter `{name}` of `{model}` is {}, but is given {}",
                    expected.with_article(),
                    found.describe()
                )
            }
            ParamDefaultKind { name, found, expected } => {
                write!(f, "the default of `{name}` is {}, not {}", found.describe(), expected.with_article())
            }
            ParamMissing { model, name } => write!(f, "model `{model}` needs a value for `{name}`"),
            NoSuchParameter { model, name } => write!(f, "model `{model}` has no parameter `{name}`"),
            ParamReserved { name } => write!(f, "`{name}` is the task's, not a model parameter"),

            UnknownModel { name } => write!(f, "unknown model `{name}`"),
            ModelParamsUnnamed => write!(f, "model parameters must be named"),
            ParamGivenTwice { name } => write!(f, "parameter `{name}` given twice"),
            TwoTrainBlocks { experiment } => write!(f, "experiment `{experiment}` has two `train` blocks"),
            TooManyTrials { experiment } => {
                write!(f, "the sweep of `{experiment}` has more than {MAX_TRIALS} trials")
            }
            SweepUnknownParameter { name, model } => {
                write!(f, "cannot sweep `{name}`: model `{model}` has no such parameter")
            }
            Ambiguous { name } => {
                write!(f, "`{name}` is ambiguous: it names both a model parameter and a setting or task option")
            }
            SweptKind { what, name, expected, found } => {
                write!(f, "{what} `{name}` is {}, but the sweep gives {}", expected.with_article(), found.describe())
            }
            Seed { found } => write!(f, "seeds are non-negative integers, found {}", found.describe()),
            MissingPart { experiment, what } => write!(f, "experiment `{experiment}` has no {what}"),
            TwoParts { experiment, what } => write!(f, "experiment `{experiment}` names two {what}s"),
            UnknownTask { name } => write!(f, "unknown task `{name}`"),
            TaskOption { task, error } => write!(f, "{task}: {error}"),
            OverrideSetsNothing { name } => {
                write!(f, "`{name}` is not a parameter, train setting or task option of any experiment here")
            }
            DefinedTwice { what, name } => write!(f, "{what} `{name}` is defined twice"),
            OverrideNotAName { key } => write!(f, "`{key}` is not a name"),
            TooLargeForDevice { experiment, needs, at, place, free } => {
                write!(f, "experiment `{experiment}` needs about {needs} to train{at}, but {place} {free} free")
            }

            UnknownSetting { key } => write!(f, "unknown train setting `{key}`"),
            SettingTwice { key } => write!(f, "train setting `{key}` is given twice"),
            OptimizerArgsUnnamed => write!(f, "optimizer arguments must be named"),
            SettingKind { key, expected, found } => {
                write!(f, "train setting `{key}` must be {}, found {}", expected.with_article(), found.describe())
            }
            StopWhen => write!(f, "`stop_when` must compare a metric with a number"),
            NoMetric { metric } => write!(f, "this task has no metric `{metric}`"),
            Select => write!(f, "`select` must name the metric whose best evaluation a run reports"),
            SelectOnTestMetric { metric } => write!(
                f,
                "`{metric}` is a metric of the test set a run reports, so it cannot select the run's evaluation"
            ),
            NoMetricToSelect { metric } => write!(f, "this task has no metric `{metric}` to select on"),
            SettingTooSmall { key, found } => write!(f, "`{key}` must be at least 1, found {found}"),
            SettingTooLarge { key, found } => write!(f, "`{key}` must be at most 2^40, found {found}"),
            SettingNotSet { key } => write!(f, "`{key}` is not set"),
            NotPositive { key, found } => write!(f, "`{key}` must be a positive number, found {}", found.describe()),
            UnknownOptimizer { name } => write!(f, "unknown optimizer `{name}`"),
            LearningRate { lr } => write!(f, "`lr` must be positive, found {lr}"),
            UnknownDevice { name } => write!(f, "unknown device `{name}`"),
            SettingRange { key, found, range } => write!(f, "`{key}` must be {range}, found {found}"),
            CheckpointEvery { minutes } => {
                write!(f, "`checkpoint_every` must be 0 or more minutes, found {minutes}")
            }

            EmptyAxis { name } => write!(f, "the sweep over `{name}` has no values"),
            SweptTwice { name } => write!(f, "`{name}` is swept twice"),
            EmptyZip => write!(f, "empty `zip` group"),
            ZipLengths { name, len, first, first_len } => {
                write!(f, "`zip` pairs values by position, but `{name}` has {len} values and `{first}` has {first_len}")
            }
            ZipOverrideValue { name, value, partners, values } => write!(
                f,
                "`{name}={value}` picks no row of the `zip` that pairs `{name}` with {}: its `{name}` values are {}",
                partners.iter().map(|p| format!("`{p}`")).collect::<Vec<_>>().join(", "),
                values.join(", ")
            ),
            RandomArguments => {
                write!(f, "`random` takes a number of draws (1 to {MAX_DRAWS}) and an optional `seed`")
            }
            RandomCount => write!(f, "`random` needs the number of draws"),
            EmptyRandom => write!(f, "empty `random` group"),
            BadDistribution { name, why } => write!(f, "`{name}`: {why}"),
            UnknownDistribution { name } => write!(f, "unknown distribution `{name}`"),

            SearchSeedDrawn => write!(f, "seeds are listed, not drawn"),
            SearchSetting { key } => write!(f, "unknown search setting `{key}`"),
            SearchNothing => write!(f, "the search searches nothing"),
            GridNeedsValues { name } => write!(f, "a grid needs listed values, but `{name}` is drawn from a range"),
            SearchTrials { found, most } => {
                write!(f, "`trials` must be a count of configurations from 1 to {most}, found {found}")
            }
            SearchNeedsTrials => write!(f, "the search needs `trials`, the number of configurations to try"),
            SearchNeedsMetric => write!(f, "the search needs a metric to optimise"),
            RungPastBudget { rung, step, steps } => {
                write!(f, "rung {rung} of the pruner is at step {step}, past the trial's {steps} steps")
            }
            UnknownSampler { name } => write!(f, "unknown sampler `{name}`"),
            UnknownPruner { name } => write!(f, "unknown pruner `{name}`"),
            SearchArgument { function, arg, expected } => write!(f, "`{function}`: `{arg}` must be {expected}"),
            SearchArgumentUnnamed { function } => write!(f, "`{function}` takes named arguments only"),
            SearchMetric { metric } => write!(f, "`{metric}` is not a validation metric of the task"),
            TwoSearchBlocks { experiment } => write!(f, "experiment `{experiment}` has two `search` blocks"),
            SearchAndSweep { experiment } => write!(f, "experiment `{experiment}` has both a `sweep` and a `search`"),
            SearchOverride { name } => {
                write!(f, "`{name}` takes one value on the command line in an experiment with a `search`")
            }

            Internal { what } => write!(f, "internal error: {what}"),
            PrimitivePanicked { prim } => {
                write!(f, "internal error in memctl: `{prim}` failed while checking this call")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_is_given_to_one_kind() {
        assert!(crate::diag::count_distinct_codes(include_str!("error_kind.rs"), 'C') > 100);
    }

    #[test]
    fn a_kind_becomes_a_diagnostic_with_its_code_and_message() {
        let d = CheckErrorKind::UnknownName { name: "dd".into() }.error();
        assert_eq!((d.code, d.message.as_str()), (Some("C014"), "unknown name `dd`"));
        let found = Value::Str("x".into());
        let d = CheckErrorKind::SettingKind { key: "batch".into(), expected: Kind::Int, found }.error();
        assert_eq!(d.message, "train setting `batch` must be an int, found the str \"x\"");
    }
}
