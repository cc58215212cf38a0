import StepLog
