"""What a render delivers beyond its segments: stems and mixes at the delivery rate and loudness, the bed with
ducking, the dubbed video, subtitles and editor timelines. Plain functions over placements and paths."""
