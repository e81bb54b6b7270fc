package kafka

// SetBeforeLoad makes the source run f before it lists the end offsets
// (--until-caught-up), to delay that past the group's assignment.
func SetBeforeLoad(s *Source, f func()) { s.beforeLoad = f }
