package annotate

// ErrorKinds lists every kind of Stats.Errors: the kind label of
// sparkpulse_annotate_errors_total.
var ErrorKinds = []string{kindNetwork, kindStatus, kindDecode, kindWrongApp}

// RefusedReasons lists every key of Stats.Refused: the reason label of
// sparkpulse_annotate_apps_refused_total.
var RefusedReasons = []string{refusedShape, refusedHostLabel, refusedRate, refusedCap, refusedRetired}
